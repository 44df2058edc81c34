/**
 * The events catalog's signature refusals (src/events/problems.ts) spell out the recipe of the
 * source's own scheme — not the hooks' workflow-id recipe. (Every constructor renders, is in the
 * union and in docs/problems.md: test/lib/problem-catalogs.test.ts, with every other catalog.)
 */
import { describe, expect, it } from "vitest";
import { eventProblems } from "../../src/events/problems";

describe("the events problem catalog", () => {
  it("the signature refusals spell out the recipe of the source's scheme", () => {
    expect(eventProblems.signatureInvalid("v1").detail).toContain('"v1:<timestamp>:<workspace>:events/<source>:"');
    expect(eventProblems.signatureMissing("standard-webhooks").detail).toContain('"<webhook-id>.<webhook-timestamp>."');
  });
});
