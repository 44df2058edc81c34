/**
 * The events catalog (src/events/problems.ts), as test/lib/problem-catalogs.test.ts holds every
 * other catalog: each constructor renders problem+json with a detail, the union is exactly the
 * codes answered, and docs/problems.md lists each code once under the catalog's heading.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import problemsDoc from "../../docs/problems.md?raw";
import { eventProblems, type EventProblemCode } from "../../src/events/problems";
import { PROBLEM_CONTENT_TYPE, type CatalogCode, type ProblemCatalog, type ProblemError } from "../../src/lib/problem";

type Samples<Catalog extends ProblemCatalog<string>> = { [Name in keyof Catalog]: () => ProblemError };

const samples = {
  invalid: () => eventProblems.invalid("/match", "it is an empty string"),
  sourceNotFound: () => eventProblems.sourceNotFound("payments"),
  sourceInvalid: () => eventProblems.sourceInvalid([{ pointer: "/match", message: "the expression does not compile" }]),
  extractFailed: () => eventProblems.extractFailed("payments", "match", "gave nothing"),
  signatureMissing: () => eventProblems.signatureMissing("standard-webhooks"),
  signatureStale: () => eventProblems.signatureStale("v1", "x-idemflow-timestamp", 300),
  signatureInvalid: () => eventProblems.signatureInvalid("standard-webhooks"),
  sourceUnavailable: () => eventProblems.sourceUnavailable(),
} satisfies Samples<typeof eventProblems>;

const section = problemsDoc.split(/^## /m).find((s) => s.startsWith("Events (src/events/problems.ts"))!;
const documented = [...section.matchAll(/^\| `([a-z0-9-]+)` \| ([^|]+) \|/gm)].map((m) => ({ code: m[1]!, status: m[2]!.trim() }));

describe("the events problem catalog", () => {
  it("is exactly the union of its codes", () => {
    expectTypeOf<CatalogCode<typeof eventProblems>>().toEqualTypeOf<EventProblemCode>();
  });

  it.each(Object.entries(samples))("%s renders problem+json with a detail, documented once with its status", async (_, sample) => {
    const problem = sample();
    const response = problem.toResponse();
    expect(response.headers.get("content-type")).toBe(PROBLEM_CONTENT_TYPE);
    const body = await response.json<{ code: string; detail: string }>();
    expect(body.code).toBe(problem.code);
    expect(body.detail).toMatch(/\S/);
    const rows = documented.filter((row) => row.code === problem.code);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.status).toMatch(new RegExp(`^${problem.status}\\b`));
  });

  it("the signature refusals spell out the recipe of the source's scheme", () => {
    expect(eventProblems.signatureInvalid("v1").detail).toContain('"v1:<timestamp>:<workspace>:events/<source>:"');
    expect(eventProblems.signatureMissing("standard-webhooks").detail).toContain('"<webhook-id>.<webhook-timestamp>."');
  });
});
