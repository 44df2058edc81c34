/**
 * A MAP item's attempts on record (docs/steps.md "Every attempt on record"; migrations/0041): the
 * attempt row is written once, when the attempt ends — no row while it runs (the trace and the
 * items route read the running attempt from the EXECUTING item), `lost` written by the reaper's
 * re-dispatch or a takeover claim in that very statement, `cancelled` by the cancel's; a `running`
 * row opened before the migration is closed keeping its start and key. Straight over the ledger's
 * statements, on the harness's clock, so every time is exact.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import {
  cancelExecution,
  claimItemAndLoad,
  claimUndoAndLoad,
  persistRowKey,
  readItemsPage,
  redispatchExpiredItemLeases,
  settleItem,
  type ItemRef,
} from "../../src/ledger";
import { readTrace } from "../../src/steps/trace";
import { DEST, executionStatus, harness, seedWorkflow, unique, type Harness } from "./helpers";
import { refundLinesWorkflow } from "./map-fixtures";

const WS = "steps-map-attempts";
const db = () => env.DB;

const refundLines = (concurrency: number) => refundLinesWorkflow(concurrency);

/** A MAP of `n` items whose list is persisted and whose first `concurrency` items are DISPATCHED (their messages taken). */
async function mapStarted(n: number, concurrency: number): Promise<{ h: Harness; id: string }> {
  const h = harness();
  const wf = await seedWorkflow(WS, refundLines(concurrency));
  const id = await h.start(wf, { order: { id: unique("O"), lines: Array.from({ length: n }, (_, i) => ({ sku: `S${i}` })) } });
  await h.deliver(h.queue.take().map((m) => m.body));
  h.queue.take();
  return { h, id };
}

async function stored(executionId: string, rowKey: string) {
  const { results } = await db()
    .prepare(
      `SELECT epoch, attempt, outcome, started_at, finished_at, idempotency_key FROM step_attempts
       WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY epoch`,
    )
    .bind(executionId, rowKey)
    .all();
  return results;
}

/** The item's attempts as the trace shows them. */
async function traced(executionId: string, item: number) {
  const trace = await readTrace(db(), WS, executionId);
  return trace!.steps.find((s) => s.vertexId === "refund")!.map!.items.find((i) => i.index === item)!.attempts;
}

const iso = (ms: number) => new Date(ms).toISOString();
const done = (now: number, ref: ItemRef, epoch: number, chainLeaseMs: number | null = null, concurrency = 1) =>
  settleItem(db(), {
    fence: { ...ref, epoch },
    now,
    outcome: { state: "COMPLETED", output: JSON.stringify({ status: 201 }), collected: JSON.stringify({ status: 201 }) },
    request: null,
    response: { status: 201, headers: {}, body: "ok" },
    concurrency,
    stopOnFailure: true,
    chainLeaseMs,
  });

describe("a MAP item's attempts, written once at their end", () => {
  it("a claim writes no attempt row: the trace and the items route read the running one from the item; its end writes it", async () => {
    const { h, id } = await mapStarted(2, 2);
    const ref = { executionId: id, vertexId: "refund", item: 0 };
    const claimedAt = h.clock.now();
    expect((await claimItemAndLoad(db(), ref, claimedAt, 60_000)).claimed!.epoch).toBe(1);
    expect(await stored(id, "refund#0")).toEqual([]);
    expect(await traced(id, 0)).toMatchObject([{ epoch: 1, attempt: 1, outcome: "running", startedAt: iso(claimedAt), finishedAt: null }]);

    h.clock.advance(300);
    const key = unique("refund-key");
    const persisted = await persistRowKey(db(), { executionId: id, vertexId: "refund#0", epoch: 1 }, key, h.clock.now(), DEST, false);
    expect(persisted!.key).toBe(key);
    expect(await stored(id, "refund#0")).toEqual([]);
    expect(await traced(id, 0)).toMatchObject([{ outcome: "running", startedAt: iso(claimedAt), idempotencyKey: key }]);
    const page = (await readItemsPage(db(), WS, id, "refund", -1, 100))!;
    expect(page.attempts).toMatchObject([
      { vertexId: "refund#0", epoch: 1, outcome: "running", startedAt: claimedAt, idempotencyKey: key },
    ]);

    h.clock.advance(200);
    expect((await done(h.clock.now(), ref, 1, null, 2)).settled).toBe(true);
    expect(await stored(id, "refund#0")).toEqual([
      { epoch: 1, attempt: 1, outcome: "completed", started_at: claimedAt, finished_at: claimedAt + 500, idempotency_key: key },
    ]);
    expect(await traced(id, 0)).toMatchObject([{ outcome: "completed", startedAt: iso(claimedAt), durationMs: 500, idempotencyKey: key }]);
    expect((await readItemsPage(db(), WS, id, "refund", -1, 100))!.attempts).toHaveLength(1);
  });

  it("a chained item runs from its start in the previous item's settle: shown running from then, written at its end", async () => {
    const { h, id } = await mapStarted(2, 1);
    const first = { executionId: id, vertexId: "refund", item: 0 };
    expect((await claimItemAndLoad(db(), first, h.clock.now(), 60_000)).claimed!.epoch).toBe(1);
    h.clock.advance(100);
    const chainedAt = h.clock.now();
    const settled = await done(chainedAt, first, 1, 60_000);
    expect(settled.started).toMatchObject({ item: 1, state: "EXECUTING", claimed: { epoch: 1, attempt: 1 } });
    expect(await stored(id, "refund#1")).toEqual([]);
    expect(await traced(id, 1)).toMatchObject([{ epoch: 1, outcome: "running", startedAt: iso(chainedAt) }]);
    h.clock.advance(250);
    await done(h.clock.now(), { ...first, item: 1 }, 1);
    expect(await stored(id, "refund#1")).toMatchObject([
      { epoch: 1, outcome: "completed", started_at: chainedAt, finished_at: chainedAt + 250 },
    ]);
  });

  it("lost at the reaper's re-dispatch and at a takeover, in that very statement; cancelled at the cancel's", async () => {
    const { h, id } = await mapStarted(1, 1);
    const ref = { executionId: id, vertexId: "refund", item: 0 };
    const firstAt = h.clock.now();
    expect((await claimItemAndLoad(db(), ref, firstAt, 1_000)).claimed!.epoch).toBe(1);
    h.clock.advance(2_000);
    expect(await redispatchExpiredItemLeases(db(), h.clock.now(), 100)).toHaveLength(1);
    expect(await stored(id, "refund#0")).toMatchObject([{ epoch: 1, outcome: "lost", started_at: firstAt, finished_at: null }]);
    expect(await traced(id, 0)).toMatchObject([{ outcome: "lost", finishedAt: null, durationMs: null }]);

    const secondAt = h.clock.now();
    expect((await claimItemAndLoad(db(), ref, secondAt, 1_000)).claimed!.epoch).toBe(2);
    h.clock.advance(2_000);
    const thirdAt = h.clock.now();
    // The takeover: its claim's UPDATE records the attempt it took over as lost.
    expect((await claimItemAndLoad(db(), ref, thirdAt, 60_000)).claimed!.epoch).toBe(3);
    expect(await stored(id, "refund#0")).toMatchObject([
      { epoch: 1, outcome: "lost" },
      { epoch: 2, outcome: "lost", started_at: secondAt, finished_at: null },
    ]);
    expect((await traced(id, 0)).map((a) => (a as { outcome: string }).outcome)).toEqual(["lost", "lost", "running"]);

    h.clock.advance(40);
    expect((await cancelExecution(db(), WS, id, h.clock.now())).cancelled).toBe(true);
    expect(await stored(id, "refund#0")).toMatchObject([
      { epoch: 1, outcome: "lost" },
      { epoch: 2, outcome: "lost" },
      { epoch: 3, attempt: 3, outcome: "cancelled", started_at: thirdAt, finished_at: thirdAt + 40 },
    ]);
    // The change stream numbers the cancelled attempt after the item's cancelled event.
    const { results } = await db()
      .prepare(
        `SELECT a.ev_mark AS mark, (SELECT max(ev.id) FROM step_events ev WHERE ev.execution_id = ?1 AND ev.vertex_id = 'refund#0'
                                      AND ev.type = 'cancelled') AS cancelled
         FROM step_attempts a WHERE a.execution_id = ?1 AND a.vertex_id = 'refund#0' AND a.epoch = 3`,
      )
      .bind(id)
      .all<{ mark: number; cancelled: number }>();
    expect(results[0]!.mark).toBe(results[0]!.cancelled);
  });

  it("a running row opened before migrations/0041: closed at its end, or lost at the reaper's, keeping its start and key", async () => {
    const { h, id } = await mapStarted(2, 2);
    const legacy = async (item: number, leaseMs: number) => {
      const ref = { executionId: id, vertexId: "refund", item };
      const openedAt = h.clock.now();
      expect((await claimItemAndLoad(db(), ref, openedAt, leaseMs)).claimed!.epoch).toBe(1);
      // The row the claim opened before migrations/0041 (`openAttempt`), with the key the persist recorded then.
      await db()
        .prepare(
          `INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, idempotency_key, seq, ev_mark)
           VALUES (?1, ?2, 1, 1, 'running', ?3, 'legacy-key', 100 + ?4, 0)`,
        )
        .bind(id, `refund#${item}`, openedAt - 50, item)
        .run();
      return { ref, openedAt };
    };
    const ended = await legacy(0, 60_000);
    const reaped = await legacy(1, 1_000);
    h.clock.advance(100);
    await done(h.clock.now(), ended.ref, 1, null, 2);
    expect(await stored(id, "refund#0")).toEqual([
      {
        epoch: 1,
        attempt: 1,
        outcome: "completed",
        started_at: ended.openedAt - 50,
        finished_at: ended.openedAt + 100,
        idempotency_key: "legacy-key",
      },
    ]);
    h.clock.advance(2_000);
    await redispatchExpiredItemLeases(db(), h.clock.now(), 100);
    expect(await stored(id, "refund#1")).toEqual([
      { epoch: 1, attempt: 1, outcome: "lost", started_at: reaped.openedAt - 50, finished_at: null, idempotency_key: "legacy-key" },
    ]);
  });
});

/** received → charge (refunded when the execution compensates) → ship. */
function compensable(): WorkflowDefinitionInput {
  const gateway = (id: string, path: string) => ({
    method: "POST",
    url: `${DEST}${path}`,
    headers: { "Idempotency-Key": `= '${id}-' & payload.order.id` },
    body: "= { 'order': payload.order.id }",
  });
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "charge",
        type: "GATEWAY",
        config: { ...gateway("charge", "/payments/charges"), compensate: gateway("refund", "/payments/refunds") },
      },
      { id: "ship", type: "GATEWAY", config: gateway("ship", "/shipping/labels") },
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "charge", to: "ship" },
    ],
  } as unknown as WorkflowDefinitionInput;
}

describe("an undo step's attempts, written once at their end", () => {
  it("shown running from its row while it runs; lost at the reaper's re-dispatch; its end written once", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, compensable());
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.deliver(h.queue.take().map((m) => m.body)); // charge
    h.dest.fault("/shipping/labels", 400);
    await h.deliver(h.queue.take().map((m) => m.body)); // ship fails for good: COMPENSATING
    const [undo] = h.queue.take();
    const ref = { executionId: id, vertexId: "charge", place: 0 };
    const claimedAt = h.clock.now();
    const claim = await claimUndoAndLoad(db(), ref, claimedAt, 1_000, { inputs: { maxBytes: 1_000_000, analysisVersion: null } });
    expect(claim.claimed!.epoch).toBe(1);
    expect(await stored(id, "charge#undo#0")).toEqual([]);
    const undoAttempts = async () => {
      const trace = await readTrace(db(), WS, id);
      return (trace!.steps.find((s) => s.vertexId === "charge")!.undo as { attempts: Array<{ outcome: string; startedAt: string }> })
        .attempts;
    };
    expect(await undoAttempts()).toMatchObject([{ outcome: "running", startedAt: iso(claimedAt) }]);
    h.clock.advance(2_000);
    expect(await redispatchExpiredItemLeases(db(), h.clock.now(), 100)).toMatchObject([{ kind: "undo" }]);
    expect(await stored(id, "charge#undo#0")).toMatchObject([{ epoch: 1, outcome: "lost", started_at: claimedAt, finished_at: null }]);
    await h.deliver([undo!.body]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect((await stored(id, "charge#undo#0")).map((a) => (a as { outcome: string }).outcome)).toEqual(["lost", "completed"]);
    expect((await undoAttempts()).map((a) => a.outcome)).toEqual(["lost", "completed"]);
  });
});
