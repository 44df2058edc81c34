/**
 * A MAP's items compensated (issue 45 §2, docs/steps.md "Compensation"): when the execution fails
 * for good, each COMPLETED item of a MAP whose item step declares `compensate` gets its own undo —
 * its key from the item's data, `output` the item's own output, the item under its name — in one
 * reverse order of completion with the other undo steps; an item that did not complete is not
 * undone. At save, an item's undo key that ignores the item is refused like the item's own key.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { validateDefinition } from "../../src/definitions/validate";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { DEST, executionStatus, harness, seedWorkflow, unique, type Harness } from "./helpers";

const WS = "dev";

function mapOrder(o: { undoKey?: string; failOnItem?: boolean } = {}): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "lines",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency: 1,
          maxItems: 100,
          onItemFailure: "fail",
          step: {
            type: "GATEWAY",
            config: {
              method: "POST",
              url: `${DEST}/payments/charges`,
              headers: { "Idempotency-Key": "= 'charge-' & payload.order.id & '-' & line.sku" },
              body: "= { 'order': payload.order.id, 'sku': line.sku }",
              retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
              compensate: {
                method: "POST",
                url: `${DEST}/payments/refunds`,
                headers: { "Idempotency-Key": o.undoKey ?? "= 'refund-' & payload.order.id & '-' & line.sku" },
                body: "= { 'charge': output.body.id, 'sku': line.sku, 'index': index }",
              },
            },
          },
        },
      },
      {
        id: "ship",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/shipping/labels`,
          headers: { "Idempotency-Key": "= 'ship-' & payload.order.id" },
          retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
        },
      },
    ],
    edges: [
      { from: "received", to: "lines" },
      { from: "lines", to: "ship" },
    ],
  } as unknown as WorkflowDefinitionInput;
}

const undosOf = async (id: string) =>
  (
    await env.DB.prepare(
      "SELECT vertex_id, item_index, state, idempotency_key, item FROM work_items " +
        "WHERE execution_id = ?1 AND kind = 'undo' ORDER BY item_index",
    )
      .bind(id)
      .all<{ vertex_id: string; item_index: number; state: string; idempotency_key: string; item: string }>()
  ).results;

describe("a MAP's items compensated", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it("ship fails for good: each charged line refunded once with its own key, the last charged first; the items' keys burnt", async () => {
    const wf = await seedWorkflow(WS, mapOrder());
    const o = unique("O");
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: o, lines: [{ sku: "A" }, { sku: "B" }, { sku: "C" }] } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/charges")).toEqual([`charge-${o}-A`, `charge-${o}-B`, `charge-${o}-C`]);
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`refund-${o}-C`, `refund-${o}-B`, `refund-${o}-A`]);
    const refunds = h.dest.effects.filter((e) => e.path === "/payments/refunds").map((e) => e.body);
    const charges = h.dest.effects.filter((e) => e.path === "/payments/charges");
    // `output` is the item's own output (its charge's id), the item and its index under their names.
    expect(refunds).toEqual([
      { charge: "ch_3", sku: "C", index: 2 },
      { charge: "ch_2", sku: "B", index: 1 },
      { charge: "ch_1", sku: "A", index: 0 },
    ]);
    expect(charges).toHaveLength(3);
    expect((await undosOf(id)).map((u) => [u.vertex_id, u.item_index, u.state, JSON.parse(u.item).item])).toEqual([
      ["lines", 0, "COMPLETED", 2],
      ["lines", 1, "COMPLETED", 1],
      ["lines", 2, "COMPLETED", 0],
    ]);
    const burnt = await env.DB.prepare("SELECT idempotency_key, vertex_id FROM burnt_keys WHERE execution_id = ?1 ORDER BY vertex_id")
      .bind(id)
      .all();
    expect(burnt.results).toEqual([
      { idempotency_key: `charge-${o}-A`, vertex_id: "lines#0" },
      { idempotency_key: `charge-${o}-B`, vertex_id: "lines#1" },
      { idempotency_key: `charge-${o}-C`, vertex_id: "lines#2" },
    ]);
  });

  it("an item that failed is not undone: the MAP fails (onItemFailure fail), only the charged lines are refunded", async () => {
    const wf = await seedWorkflow(WS, mapOrder());
    const o = unique("O");
    // The third line's charge is refused: the MAP fails, the two charged lines are refunded.
    const id = await h.start(wf, { order: { id: o, lines: [{ sku: "A" }, { sku: "B" }, { sku: "C" }] } });
    let charges = 0;
    const inner = h.dest.fetch;
    h.rt.fetch = async (input, init) => {
      const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
      if (url.pathname === "/payments/charges" && ++charges === 3) h.dest.fault("/payments/charges", 400);
      return inner(input, init);
    };
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`refund-${o}-B`, `refund-${o}-A`]);
    expect((await undosOf(id)).map((u) => JSON.parse(u.item).item)).toEqual([1, 0]);
  });

  it("at save: an item's undo key that ignores the item is refused like the item's own key", () => {
    const result = validateDefinition(mapOrder({ undoKey: "= 'refund-' & payload.order.id" }));
    expect(result.ok).toBe(false);
    const errors = "errors" in result ? result.errors : [];
    expect(errors).toContainEqual(
      expect.objectContaining({
        code: "map-item-key-ignores-item",
        pointer: "/vertices/1/config/step/config/compensate/headers/Idempotency-Key",
      }),
    );
  });
});
