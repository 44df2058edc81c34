/**
 * A key declared to travel through a member named `__proto__` (issue 26, finding 1). Validation
 * refuses such a pointer now (test/definitions/prototype-names.test.ts), but a version saved
 * before is immutable and never validated again, so it still runs: these versions are stored
 * with the schema's parse only (`seedWorkflow`, no save-time rules), run through the real
 * consumer, and what the destination received is read from its request log.
 */
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { ownMember } from "../../src/lib/own-member";
import { DEST, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-prototype-key";

/** entry → pay, a POST to the destination's /echo whose key is declared by `declaration`. */
const echoWorkflow = (declaration: Record<string, unknown>): WorkflowDefinitionInput =>
  ({
    id: unique("proto"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "pay",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/echo`,
          body: { amount: "= payload.order.total" },
          idempotencyKey: { value: "= $idempotencyKey('pay', payload.order.id)", ...declaration },
        },
      },
    ],
    edges: [{ from: "received", to: "pay" }],
  }) as WorkflowDefinitionInput;

/** Runs the workflow once; the one request the destination received and the key the step persisted. */
async function runOnce(declaration: Record<string, unknown>) {
  const h = harness();
  const wf = await seedWorkflow(WS, echoWorkflow(declaration));
  const id = await h.start(wf, { order: { id: unique("O"), total: 12 } });
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  const key = (await stepsOf(id)).pay!.idempotency_key;
  expect(key).toMatch(/^pay-/);
  expect(h.dest.requests).toHaveLength(1);
  return { request: h.dest.requests[0]!, key: key! };
}

function expectPrototypeUntouched(): void {
  const plain = {} as Record<string, unknown>;
  expect(plain.x).toBeUndefined();
  expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain("x");
  expect(Object.getPrototypeOf(plain)).toBe(Object.prototype);
}

describe("a stored version whose key travels through a member named __proto__", () => {
  it("bodyField /__proto__/x: the body carries the key at its own /__proto__/x; Object.prototype is untouched", async () => {
    const { request, key } = await runOnce({ bodyField: "/__proto__/x" });
    const body = JSON.parse(request.body) as Record<string, unknown>;
    expect(body.amount).toBe(12);
    expect(ownMember(ownMember(body, "__proto__"), "x")).toBe(key);
    expectPrototypeUntouched();
  });

  it("bodyField /__proto__: the body's own __proto__ member is the key", async () => {
    const { request, key } = await runOnce({ bodyField: "/__proto__" });
    const body = JSON.parse(request.body) as Record<string, unknown>;
    expect(ownMember(body, "__proto__")).toBe(key);
    expect(body.amount).toBe(12);
    expectPrototypeUntouched();
  });

  it("header __proto__: the request carries the key in a header named __proto__", async () => {
    const { request, key } = await runOnce({ header: "__proto__" });
    expect(ownMember(request.headers, "__proto__")).toBe(key);
    expectPrototypeUntouched();
  });
});
