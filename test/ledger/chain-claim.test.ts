/**
 * Two ledger rules of the settle batch, tested directly against the real D1 with rows
 * the engine wrote: the chained claim takes only a step the settle inserts (src/ledger/step-settle.ts `decideStep`),
 * and a fan-in decision made again is a no-op, never a batch error (src/ledger/step-settle.ts `decideStep`).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { claimAndLoad, settleAndDispatch } from "../../src/ledger";
import { descendantsInOrder } from "../../src/steps/graph";
import { readTrace } from "../../src/steps/trace";
import { harness, seedWorkflow, stepsOf, takenOverCharge, unique } from "../steps/helpers";

const WS = "steps-chaining"; // granted the charge's Worker secret (vitest.config.ts)

describe("the chained claim of a settle", () => {
  it("claims only a successor the settle inserts now, under its own fence: never a row on record, never for a stale twin", async () => {
    const h = harness();
    // charge claimed (epoch 1); its worker stalls, the lease expires, a takeover claims it (epoch 2).
    const { wf, id } = await takenOverCharge(h, WS);
    const settle = (epoch: number) =>
      settleAndDispatch(env.DB, {
        fence: { executionId: id, vertexId: "charge", epoch },
        now: h.clock.now(),
        outcome: { state: "COMPLETED", output: "{}", nextVertices: ["done"] },
        request: null,
        backfill: [],
        descendants: descendantsInOrder(wf.definition, "charge"),
        chain: { candidates: ["done"], leaseMs: 30_000 },
      });
    const current = await settle(2);
    expect(current).toMatchObject({ settled: true, dispatched: [], chained: { vertexId: "done", epoch: 1, attempt: 1 } });
    const done = (await stepsOf(id)).done!;
    expect(done).toMatchObject({ state: "EXECUTING", epoch: 1, attempt: 1 });
    // Its attempt runs with no row (migrations/0040): the trace reads it from the step, started when it was inserted claimed.
    const attempt = await env.DB.prepare("SELECT outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id = 'done'")
      .bind(id)
      .first<{ outcome: string }>();
    expect(attempt).toBeNull();
    const trace = await readTrace(env.DB, WS, id);
    expect(trace!.steps.find((s) => s.vertexId === "done")!.attempts).toMatchObject([
      { epoch: 1, attempt: 1, outcome: "running", startedAt: new Date(h.clock.now()).toISOString(), finishedAt: null },
    ]);
    // The stale worker settles after: fenced out; its decision finds done on record and claims nothing.
    expect(await settle(1)).toMatchObject({ settled: false, chained: null, dispatched: [] });
    // The current settle replayed at the same instant (the guard holds): done is on record, nothing is claimed.
    expect((await settle(2)).chained).toBeNull();
    expect((await stepsOf(id)).done).toEqual(done);
  });
});

describe("a fan-in decided twice", () => {
  it("two predecessors settling at once, then their stale twins: one fan-in row, one dispatch, no batch error", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "in", type: "ENTRY_POINT", config: {} },
        { id: "a", type: "TRANSFORM", config: { output: { n: 1 } } },
        { id: "b", type: "TRANSFORM", config: { output: { n: 2 } } },
        { id: "c", type: "TRANSFORM", config: { output: { n: 3 } } },
        { id: "join", type: "TRANSFORM", config: { output: { n: "= steps.b.n + steps.c.n" } } },
      ],
      edges: [
        { from: "in", to: "a" },
        { from: "a", to: "b" },
        { from: "a", to: "c" },
        { from: "b", to: "join" },
        { from: "c", to: "join" },
      ],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, {});
    await h.deliver(h.queue.take().map((m) => m.body)); // a: b and c are DISPATCHED
    expect(
      h.queue
        .take()
        .map((m) => m.body.vertexId)
        .sort(),
    ).toEqual(["b", "c"]);
    // b and c claimed (epoch 1), their workers stall, their leases expire and each is taken over (epoch 2).
    const claim = async (vertexId: string) => (await claimAndLoad(env.DB, { executionId: id, vertexId }, h.clock.now(), 1_000)).claimed;
    expect(await claim("b")).toMatchObject({ epoch: 1 });
    expect(await claim("c")).toMatchObject({ epoch: 1 });
    h.clock.advance(5_000);
    expect(await claim("b")).toMatchObject({ epoch: 2 });
    expect(await claim("c")).toMatchObject({ epoch: 2 });
    const settle = (vertexId: string, epoch: number) =>
      settleAndDispatch(env.DB, {
        fence: { executionId: id, vertexId, epoch },
        now: h.clock.now(),
        outcome: { state: "COMPLETED", output: "{}", nextVertices: ["join"] },
        request: null,
        backfill: [],
        descendants: descendantsInOrder(wf.definition, vertexId),
      });
    // The current workers settle together: whichever commits second decides join.
    const current = await Promise.all([settle("b", 2), settle("c", 2)]);
    expect(current.map((r) => r.settled)).toEqual([true, true]);
    expect(current.flatMap((r) => r.dispatched)).toEqual(["join"]);
    // The stale workers settle after: fenced out, yet their batches decide join again (both
    // predecessors are settled now) — the decision must be a no-op, not a constraint error that
    // rolls back the fenced-out record.
    const stale = await Promise.all([settle("b", 1), settle("c", 1)]);
    expect(stale).toEqual([
      expect.objectContaining({ settled: false, dispatched: [], skipped: [] }),
      expect.objectContaining({ settled: false, dispatched: [], skipped: [] }),
    ]);
    const { results: joins } = await env.DB.prepare("SELECT state, epoch FROM steps WHERE execution_id = ?1 AND vertex_id = 'join'")
      .bind(id)
      .all<{ state: string; epoch: number }>();
    expect(joins).toEqual([{ state: "DISPATCHED", epoch: 0 }]);
    const { results: fencedOut } = await env.DB.prepare(
      "SELECT vertex_id AS vertexId, epoch FROM step_events WHERE execution_id = ?1 AND type = 'fenced_out' ORDER BY vertex_id",
    )
      .bind(id)
      .all<{ vertexId: string; epoch: number }>();
    expect(fencedOut).toEqual([
      { vertexId: "b", epoch: 1 },
      { vertexId: "c", epoch: 1 },
    ]);
  });
});
