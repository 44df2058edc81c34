/**
 * A MAP's key that reads an item field named `__proto__` (issue 43, "bad input"): saved as written
 * (test/definitions/map.test.ts), and at run time it reads the item's OWN member — never a
 * prototype: an item that has one sends its own key, an item without one fails before it sends (the
 * key's part is absent), and nothing reaches `Object.prototype`.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { validateDefinition } from "../../src/definitions/validate";
import { dbOf } from "../helpers/shards";
import { DEST, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-map-proto";
const db = () => dbOf(env, WS);

function protoKeyed(): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          onItemFailure: "continue",
          step: {
            type: "GATEWAY",
            config: {
              method: "POST",
              url: `${DEST}/payments/charges`,
              headers: { "Idempotency-Key": "= 'refund-' & payload.order.id & '-' & line.__proto__" },
              body: "= { 'sku': line.sku }",
            },
          },
        },
      },
    ],
    edges: [{ from: "received", to: "refund" }],
  } as unknown as WorkflowDefinitionInput;
}

describe("a MAP key reading the item's `__proto__` field", () => {
  it("sends the item's own member as the key, fails an item without one before it sends, and never reads a prototype", async () => {
    const definition = protoKeyed();
    const checked = validateDefinition(definition);
    expect(checked.ok ? [] : checked.errors).toEqual([]);
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, definition);
    const orderId = unique("O");
    // Parsed from JSON, as a trigger's payload is: `__proto__` is an own member of the first two lines.
    const payload = JSON.parse(
      `{"order":{"id":"${orderId}","lines":[{"__proto__":"A","sku":"a"},{"__proto__":"B","sku":"b"},{"sku":"c"}]}}`,
    ) as unknown;
    const id = await h.start(wf, payload);
    await h.drain();

    expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain("A");
    expect(({} as Record<string, unknown>).sku).toBeUndefined();
    const { results: items } = await db()
      .prepare("SELECT item_index, state, idempotency_key, error FROM work_items WHERE execution_id = ?1 ORDER BY item_index")
      .bind(id)
      .all<{ item_index: number; state: string; idempotency_key: string | null; error: string | null }>();
    expect(items.map((i) => [i.item_index, i.state, i.idempotency_key])).toEqual([
      [0, "COMPLETED", `refund-${orderId}-A`],
      [1, "COMPLETED", `refund-${orderId}-B`],
      [2, "FAILED", null],
    ]);
    expect(items[2]!.error).toMatch(/__proto__/);
    // Two sends, each with its own key; the item without the field sent nothing.
    expect(h.dest.keysSent("/payments/charges").sort()).toEqual([`refund-${orderId}-A`, `refund-${orderId}-B`]);
    const steps = await stepsOf(id, db());
    expect(steps.refund!.state).toBe("COMPLETED");
    expect(JSON.parse(steps.refund!.output!)).toMatchObject({ failed: [{ index: 2 }] });
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });
});
