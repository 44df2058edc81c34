/**
 * What the history removal writes (issue 47 point 2, docs/ledger.md "Rows written per execution"):
 * the key sends of the removed executions are found by their steps' and MAP items' keys, not by an
 * index on `execution_id` (dropped by migrations/0033) — every one marked kept, a MAP item's too.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { chargeWorkflow, DEST, executionStatus, harness, seedWorkflow, unique } from "../steps/helpers";
import { DAY, rowsOf, GONE, sweepAt } from "../history/helpers";

const WS = "rows-removal";

/** entry → charge (a keyed Gateway) → refund (a MAP of keyed Gateways) → done; every key unguarded (the header form). */
function keyedEverywhere(): WorkflowDefinitionInput {
  const gateway = (key: string) => ({
    type: "GATEWAY",
    config: {
      method: "POST",
      url: `${DEST}/payments/charges`,
      headers: { "Idempotency-Key": key },
      body: "= { 'amount': 1 }",
    },
  });
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      { id: "charge", ...gateway("= 'charge-' & payload.order.id") },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency: 3,
          maxItems: 10,
          step: gateway("= 'refund-' & payload.order.id & '-' & line.sku"),
        },
      },
      { id: "done", type: "TRANSFORM", config: { output: { ok: true } } },
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "charge", to: "refund" },
      { from: "refund", to: "done" },
    ],
  } as unknown as WorkflowDefinitionInput;
}

const sendsOf = async (id: string) =>
  (
    await env.DB.prepare("SELECT vertex_id AS vertex, guarded FROM destination_key_sends WHERE execution_id = ?1 ORDER BY vertex_id")
      .bind(id)
      .all<{ vertex: string; guarded: number }>()
  ).results;

describe("the removal's key sends", () => {
  it("marks every unguarded send of a removed execution kept — its steps' and its MAP items' — found by their keys", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, keyedEverywhere());
    const order = unique("O");
    const id = await h.start(wf, { order: { id: order, lines: [{ sku: "A" }, { sku: "B" }, { sku: "C" }] } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const before = await sendsOf(id);
    expect(before.map((s) => [s.vertex, s.guarded])).toEqual([
      ["charge", 0],
      ["refund#0", 0],
      ["refund#1", 0],
      ["refund#2", 0],
    ]);

    const { report } = await sweepAt(h.clock.now() + 8 * DAY);
    expect(report.removed).toBeGreaterThanOrEqual(1);
    expect(await rowsOf(id)).toEqual(GONE);
    // Kept for good (aged by HISTORY_KEY_SENDS and the key memory like a guarded one), none left unguarded.
    expect((await sendsOf(id)).map((s) => [s.vertex, s.guarded])).toEqual([
      ["charge", 1],
      ["refund#0", 1],
      ["refund#1", 1],
      ["refund#2", 1],
    ]);
  });

  it("the bench's job removed: 8 rows written per execution (tombstone 2, key send 2, steps 3, execution 1)", async () => {
    const h = harness({}, { chain: true, workspace: "steps-chaining" });
    const wf = await seedWorkflow("steps-chaining", chargeWorkflow(unique("wf")));
    const ids = [await h.start(wf, { order: { id: unique("O"), total: 1 } }), await h.start(wf, { order: { id: unique("O"), total: 2 } })];
    for (const id of ids) expect(await executionStatus(id)).toBe("COMPLETED");
    const { report, counted } = await sweepAt(h.clock.now() + 8 * DAY);
    expect(report.removed).toBe(ids.length);
    // Deletes count the table row only (D1's `rows_written`); the tombstone and the kept send write an index entry each.
    expect(counted.rowsWritten()).toBe(8 * ids.length);
  });
});
