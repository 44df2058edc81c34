/**
 * What the history removal writes (issue 47 point 2, docs/ledger.md "Rows written per execution"):
 * the key sends of the removed executions are found by their steps' and MAP items' keys, not by an
 * index on `execution_id` (dropped by migrations/0033) — every one marked kept, a MAP item's too;
 * since migrations/0043 they are born kept, and the removal writes nothing for them.
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
    await env.DB.prepare(
      `SELECT vertex_id AS vertex, guarded, unguarded, retention_ms AS retentionMs FROM destination_key_sends
       WHERE execution_id = ?1 ORDER BY vertex_id`,
    )
      .bind(id)
      .all<{ vertex: string; guarded: number; unguarded: number | null; retentionMs: number | null }>()
  ).results;

describe("the removal's key sends", () => {
  it("keeps every unguarded send of a removed execution — its steps' and its MAP items' — born kept: the removal writes none", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, keyedEverywhere());
    const order = unique("O");
    const id = await h.start(wf, { order: { id: order, lines: [{ sku: "A" }, { sku: "B" }, { sku: "C" }] } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const before = await sendsOf(id);
    // Born kept (migrations/0043): `guarded = 1`, marked `unguarded` (kept while its execution lives),
    // hot for the execution's shortest retention (7 days, the deployment's default for COMPLETED).
    expect(before.map((s) => [s.vertex, s.guarded, s.unguarded, s.retentionMs])).toEqual([
      ["charge", 1, 1, 7 * DAY],
      ["refund#0", 1, 1, 7 * DAY],
      ["refund#1", 1, 1, 7 * DAY],
      ["refund#2", 1, 1, 7 * DAY],
    ]);

    const { report } = await sweepAt(h.clock.now() + 8 * DAY);
    expect(report.removed).toBeGreaterThanOrEqual(1);
    expect(report.rows.keySends).toBe(0);
    expect(await rowsOf(id)).toEqual(GONE);
    // Kept for good (aged by HISTORY_KEY_SENDS and the key memory like a guarded one), as they were born.
    expect(await sendsOf(id)).toEqual(before);
  });

  it("the bench's job removed: 5 rows written per execution (tombstone 2, steps 2, execution 1)", async () => {
    const h = harness({}, { chain: true, workspace: "steps-chaining" });
    const wf = await seedWorkflow("steps-chaining", chargeWorkflow(unique("wf")));
    const ids = [await h.start(wf, { order: { id: unique("O"), total: 1 } }), await h.start(wf, { order: { id: unique("O"), total: 2 } })];
    for (const id of ids) expect(await executionStatus(id)).toBe("COMPLETED");
    const { report, counted } = await sweepAt(h.clock.now() + 8 * DAY);
    expect(report.removed).toBe(ids.length);
    // Deletes count the table row only (D1's `rows_written`); the tombstone writes an index entry. The
    // key send was born kept (migrations/0043): the removal writes nothing for it (2 rows before); the
    // completed attempts are on their steps' rows (migrations/0042: 2 rows before); the entry has no
    // row (migrations/0045: 1 row before).
    expect(counted.rowsWritten()).toBe(5 * ids.length);
  });
});
