/**
 * One maximum for every duration of a definition (issue 26, finding 8): `MAX_DURATION_MS`, 365
 * days, refused above at save with the pointer and the maximum — through the validator and through
 * PUT. And `idempotencyFields: []` refused directly (before, only the JSON Schema snapshot did).
 */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { MAX_DURATION_MS } from "../../src/definitions/schema";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";

function errorsOf(input: unknown): ValidationError[] {
  const result = validateDefinition(input);
  return result.ok ? [] : result.errors;
}

const brief = (errors: ValidationError[]) => errors.map((e) => [e.pointer, e.code]);

/** entry (with `entry` config) → pay, whose key declares `retention` when given. */
const workflow = (id: string, entry: Record<string, unknown>, retention?: number | string) => ({
  id,
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: entry },
    {
      id: "pay",
      type: "GATEWAY",
      config: {
        method: "POST",
        url: "http://localhost:8788/checkout/payments",
        idempotencyKey: {
          value: "= $idempotencyKey('pay', payload.order.id)",
          ...(retention === undefined ? {} : { retention }),
        },
      },
    },
  ],
  edges: [{ from: "received", to: "pay" }],
});

const put = (id: string, body: unknown) =>
  SELF.fetch(`http://idemflow.test/v1/workflows/${id}`, {
    method: "PUT",
    headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
    body: JSON.stringify(body),
  });

const DEDUPE = "/vertices/0/config/dedupeWindow";
const RETENTION = "/vertices/1/config/idempotencyKey/retention";

describe("the longest duration a definition may set", () => {
  it("is 365 days", () => {
    expect(MAX_DURATION_MS).toBe(365 * 24 * 3_600_000);
  });

  it.each([
    ["365d", []],
    [MAX_DURATION_MS, []],
    ["8760h", []],
    ["366d", ["duration-too-long"]],
    [MAX_DURATION_MS + 1, ["duration-too-long"]],
    [Number.MAX_SAFE_INTEGER, ["duration-too-long"]],
    ["99999999999999999999999d", ["duration-too-long"]],
  ] as const)("a key retention of %s: %j", (retention, codes) => {
    const errors = errorsOf(workflow("d", {}, retention));
    expect(errors.map((e) => e.code)).toEqual(codes);
    for (const e of errors) expect(e.pointer).toBe(RETENTION);
  });

  it.each([
    ["365d", []],
    ["525600m", []],
    ["366d", ["duration-too-long"]],
    [Number.MAX_SAFE_INTEGER, ["duration-too-long"]],
  ] as const)("a dedupe window of %s: %j", (dedupeWindow, codes) => {
    const errors = errorsOf(workflow("d", { dedupeWindow }));
    expect(errors.map((e) => e.code)).toEqual(codes);
    for (const e of errors) expect(e.pointer).toBe(DEDUPE);
  });

  it("the message names the value and the maximum", () => {
    const [error] = errorsOf(workflow("d", {}, Number.MAX_SAFE_INTEGER));
    expect(error!.message).toBe(
      `idempotencyKey.retention ${Number.MAX_SAFE_INTEGER} is longer than 365 days (31536000000 ms), the longest duration a ` +
        "definition may set; set `365d` or less",
    );
  });

  it("PUT answers 422 with each pointer and the maximum", async () => {
    const response = await put("dur-put", workflow("dur-put", { dedupeWindow: "400d" }, Number.MAX_SAFE_INTEGER));
    expect(response.status).toBe(422);
    const problem = await response.json<{ errors: ValidationError[] }>();
    expect(brief(problem.errors)).toEqual([
      [DEDUPE, "duration-too-long"],
      [RETENTION, "duration-too-long"],
    ]);
    for (const e of problem.errors) expect(e.message).toContain("365 days (31536000000 ms)");
  });
});

describe("idempotencyFields", () => {
  const fields = (idempotencyFields: unknown) => ({
    id: "fields",
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: { idempotencyFields } },
      { id: "t", type: "TRANSFORM", config: { output: "= payload" } },
    ],
    edges: [{ from: "received", to: "t" }],
  });

  it("refuses an empty list at its pointer (no field would identify anything), accepts one field", () => {
    expect(brief(errorsOf(fields([])))).toEqual([["/vertices/0/config/idempotencyFields", "invalid-too-small"]]);
    expect(errorsOf(fields(["order.id"]))).toEqual([]);
  });

  it("PUT answers 422 for an empty list, with its pointer", async () => {
    const response = await put("fields", fields([]));
    expect(response.status).toBe(422);
    const problem = await response.json<{ errors: ValidationError[] }>();
    expect(brief(problem.errors)).toEqual([["/vertices/0/config/idempotencyFields", "invalid-too-small"]]);
  });
});
