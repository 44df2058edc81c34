/**
 * Two ledger rules of the settle batch, tested directly against the real D1 with rows
 * the engine wrote: the chained claim takes only a step never attempted (src/ledger/chain-claim.ts),
 * and a fan-in decision made again is a no-op, never a batch error (src/ledger/steps.ts `decideStep`).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { claimAndLoad, settleAndDispatch, type ChainedClaim } from "../../src/ledger";
import { chainedClaimStatements, type ChainGuard } from "../../src/ledger/chain-claim";
import { descendantsInOrder } from "../../src/steps/graph";
import { chargeWorkflow, harness, seedWorkflow, stepsOf, unique } from "../steps/helpers";

const WS = "steps-chaining"; // granted the charge's Worker secret (vitest.config.ts)

/** The batch's own success (its settle's fence), taken as held: only the step's conditions decide. */
const HELD: ChainGuard = { sql: "1 = 1", params: [] };

async function chainedClaim(executionId: string, vertexId: string, now: number): Promise<ChainedClaim | null> {
  const { claim } = chainedClaimStatements(env.DB, executionId, { candidates: [vertexId], leaseMs: 30_000 }, now, HELD);
  return claim.first<ChainedClaim>();
}

describe("the chained claim", () => {
  it("refuses a due DISPATCHED step that already ran once (attempt ≥ 1): only a fresh step is claimed inline", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 4 } });
    // Its first attempt answered 503: back to DISPATCHED for a retry, with its key persisted.
    h.dest.fault("/payments/charges", 503);
    const [message] = h.queue.take();
    await h.deliver([message!.body]);
    const before = (await stepsOf(id)).charge!;
    expect(before).toMatchObject({ state: "DISPATCHED", epoch: 1, attempt: 1 });
    expect(before.idempotency_key).not.toBeNull();
    // Past its backoff, so due: everything the chained claim asks of a step holds but `attempt = 0`.
    const now = h.clock.now() + 60_000;
    const { due } = (await env.DB.prepare("SELECT available_at <= ?3 AS due FROM steps WHERE execution_id = ?1 AND vertex_id = ?2")
      .bind(id, "charge", now)
      .first<{ due: number }>())!;
    expect(due).toBe(1);
    expect(await chainedClaim(id, "charge", now)).toBeNull();
    expect((await stepsOf(id)).charge).toEqual(before);

    // The same step, fresh, is claimed by the same statement.
    const fresh = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    h.queue.take();
    expect(await chainedClaim(fresh, "charge", h.clock.now())).toMatchObject({ vertexId: "charge", epoch: 1, attempt: 1 });
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
