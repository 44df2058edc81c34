/**
 * Step chaining (src/steps/chain.ts, src/ledger/chain-claim.ts) against the real D1 and the real
 * demo destination (the Idempotency-Key ledger middleware): the start batch claims the first step
 * and the trigger runs it inline; each settle batch claims the next one. Proven here: the round
 * trips and queue messages of a chained execution, one side effect when a chained claim races a
 * redelivery or a takeover, recovery of a claimed step that never ran, what goes back to the
 * queue when the budget or the inline window says so, that a duplicate start claims nothing, that
 * a queue batch shares one budget and an offer gives back what it held (ran, or not claimed), the
 * isolate's inline-run cap and its slots, the inputs read of a chained step, and the chained heartbeat.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { app } from "../../src/app";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { inlineBytesInFlight, inlineRunsInFlight, startWorkflowExecution, type IngressDeps } from "../../src/ingress/start";
import { chainConfigFromEnv, DEFAULT_CHAIN } from "../../src/steps/chain";
import type { StepMessage } from "../../src/steps/messages";
import { reap } from "../../src/steps/reaper";
import { cancelExecution, type CancelResult } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-chaining";

/** Wait (real time) until `done()` holds: the inline run goes on after `start` was called. */
async function until(done: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The ingress of `h` with chaining on (the harness's own is off): its inline runs are collected in `inline`. */
function chainedIngress(h: Harness, inline: Array<Promise<unknown>>): IngressDeps {
  return {
    db: h.rt.db,
    queue: h.queue as unknown as Queue<StepMessage>,
    now: h.clock.now,
    chain: { runtime: { ...h.rt, chain: { ...DEFAULT_CHAIN } }, waitUntil: (work) => inline.push(work) },
  };
}

describe("step chaining", () => {
  it("runs entry → charge → done in the trigger's invocation: 2 D1 round trips, no queue message", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db }, { chain: true });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    counting.reset();
    const id = await h.start(wf, { order: { id: unique("O"), total: 42 } });
    // start batch (charge inserted claimed, with its key); settle of charge with done, a TRANSFORM,
    // completed in it (src/steps/inline-transform.ts: there was a third batch, done's settle).
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch"]);
    expect(counting.roundTrips()).toBe(2);
    // The statements of each batch (D1 runs every one of them, guarded out or not): the start is the
    // execution row and one insert of every start step (issue 31: at most 15 in all, from 23).
    expect(counting.calls.map((c) => c.sql.length)).toEqual([2, 6]);
    expect(h.queue.sends).toBe(0);
    expect(h.queue.pending).toHaveLength(0);
    const { max_attempt } = (await env.DB.prepare("SELECT max_attempt FROM executions WHERE id = ?1")
      .bind(id)
      .first<{ max_attempt: number }>())!;
    expect(max_attempt).toBe(1);
    const steps = await stepsOf(id);
    expect(steps.charge).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(steps.done).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(JSON.parse(steps.done!.output!)).toEqual({ charged: "ch_1" });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1);
    expect(h.dest.keysSent("/payments/charges")).toEqual([steps.charge!.idempotency_key]);
    // Each chained step has its attempt row, finished, numbered in the change stream (migration 0014).
    const { results: attempts } = await env.DB.prepare(
      "SELECT vertex_id, epoch, outcome, seq, ev_mark FROM step_attempts WHERE execution_id = ?1 ORDER BY seq",
    )
      .bind(id)
      .all<{ vertex_id: string; epoch: number; outcome: string; seq: number | null; ev_mark: number | null }>();
    expect(attempts.map((a) => [a.vertex_id, a.epoch, a.outcome])).toEqual([
      ["charge", 1, "completed"],
      ["done", 1, "completed"],
    ]);
    expect(attempts.every((a) => a.seq !== null && a.ev_mark !== null)).toBe(true);
  });

  it("the start batch persists the first step's key with its claim: the key the step computes, on the step and its attempt", async () => {
    const orderId = unique("O");
    // The same key the step computes when it runs from its message (chaining off).
    const plain = harness();
    const plainId = await plain.start(await seedWorkflow(WS, chargeWorkflow(unique("wf"))), { order: { id: orderId, total: 5 } });
    await plain.drain();
    const plainKey = (await stepsOf(plainId)).charge!.idempotency_key;
    expect(plainKey).toMatch(/^charge/);

    let seen: { key: string | null; sends: number } | null = null;
    const h = harness(
      {
        // Before the inline run: the key is on the step already, and its send on record, as of the start.
        beforeChainedRun: async (fence) => {
          if (fence.vertexId !== "charge") return;
          const step = await env.DB.prepare("SELECT idempotency_key AS key FROM steps WHERE execution_id = ?1 AND vertex_id = ?2")
            .bind(fence.executionId, fence.vertexId)
            .first<{ key: string | null }>();
          const sends = await env.DB.prepare(
            "SELECT count(*) AS n FROM destination_key_sends WHERE workspace = ?1 AND idempotency_key = ?2",
          )
            .bind(WS, step!.key)
            .first<{ n: number }>();
          seen = { key: step!.key, sends: sends!.n };
        },
      },
      { chain: true },
    );
    const startedAt = h.clock.now();
    const id = await h.start(await seedWorkflow(WS, chargeWorkflow(unique("wf"))), { order: { id: orderId, total: 5 } });
    const steps = await stepsOf(id);
    expect(steps.charge).toMatchObject({ state: "COMPLETED", idempotency_key: plainKey });
    expect(seen).toEqual({ key: plainKey, sends: 1 });
    expect(h.dest.keysSent("/payments/charges")).toEqual([plainKey]);
    const attempt = await env.DB.prepare(
      "SELECT idempotency_key AS key FROM step_attempts WHERE execution_id = ?1 AND vertex_id = 'charge'",
    )
      .bind(id)
      .first<{ key: string | null }>();
    expect(attempt!.key).toBe(plainKey);
    // The plain run sent the key first (same workspace, key and destination): its send stays the first.
    const send = await env.DB.prepare(
      `SELECT first_sent_at AS firstSentAt, execution_id AS executionId
       FROM destination_key_sends WHERE workspace = ?1 AND idempotency_key = ?2`,
    )
      .bind(WS, plainKey)
      .all<{ firstSentAt: number; executionId: string }>();
    expect(send.results).toHaveLength(1);
    expect(send.results[0]!.executionId).toBe(plainId);
    expect(send.results[0]!.firstSentAt).toBeLessThanOrEqual(startedAt);
  });

  it("a takeover after the window: its key (from execution.id) is its own; the other execution's step is never written", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db }, { chain: true });
    const definition = chargeWorkflow(unique("wf"), { headers: { "Idempotency-Key": "= $idempotencyKey('charge', execution.id)" } });
    definition.vertices[0] = { id: "received", type: "ENTRY_POINT", config: { dedupeWindow: "1m" } };
    const wf = await seedWorkflow(WS, definition);
    const inline: Array<Promise<unknown>> = [];
    const deps = chainedIngress(h, inline);
    const start = async (orderId: string, material: string) => {
      const result = await startWorkflowExecution(deps, {
        workflow: wf,
        triggerKind: "webhook",
        payload: { order: { id: orderId, total: 3 } },
        identity: { kind: "client", material, scope: "production" },
      });
      await Promise.all(inline.splice(0));
      return result;
    };
    const material = unique("client-id");
    const same = () => start("O-same", material);
    await start(unique("O"), unique("client-id")); // warms the definition caches
    counting.reset();
    const first = await same();
    // Claimed by its identity: the key is computed for the first candidate id, persisted with the claim
    // (two round trips: done completes in the charge's settle, src/steps/inline-transform.ts).
    expect(counting.roundTrips()).toBe(2);
    const firstKey = (await stepsOf(first.executionId)).charge!.idempotency_key;
    expect(firstKey).not.toBeNull();
    // The first execution's charge as another worker would hold it, claimed at the very millisecond the
    // takeover starts, its key not persisted yet: only the start batch's guard tells the two apart.
    h.clock.advance(61_000);
    await env.DB.prepare(
      `UPDATE steps SET state = 'EXECUTING', epoch = 1, attempt = 1, idempotency_key = NULL, lease_until = ?2 + 30000,
                        output = NULL, finished_at = NULL, updated_at = ?2
       WHERE execution_id = ?1 AND vertex_id = 'charge'`,
    )
      .bind(first.executionId, h.clock.now())
      .run();
    counting.reset();
    const second = await same();
    expect(second.deduplicated).toBe(false);
    expect(second.executionId).not.toBe(first.executionId);
    // The takeover's key was computed before its start too, from its own execution id: every window's
    // id (the identity and the window's start) is known before the claim, so the fold holds for it
    // (two round trips: done completes in the charge's settle).
    expect(counting.roundTrips()).toBe(2);
    const secondKey = (await stepsOf(second.executionId)).charge!.idempotency_key;
    expect(secondKey).not.toBeNull();
    expect(secondKey).not.toBe(firstKey);
    expect(h.dest.keysSent("/payments/charges").slice(-1)).toEqual([secondKey]);
    // The first execution's step: untouched, no key written, no send recorded for it at the takeover.
    expect((await stepsOf(first.executionId)).charge).toMatchObject({ state: "EXECUTING", idempotency_key: null });
    const sends = await env.DB.prepare("SELECT count(*) AS n FROM destination_key_sends WHERE execution_id = ?1 AND first_sent_at = ?2")
      .bind(first.executionId, h.clock.now())
      .first<{ n: number }>();
    expect(sends!.n).toBe(0);
  });

  it("a chained claim racing a redelivery and then a takeover of the same step: one side effect, the fence holds", async () => {
    // A chained lease shorter than the inline window: the stale run still offers a claim when it settles.
    const h = harness({}, { chain: { leaseMs: 10_000 } });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const started = h.start(wf, { order: { id: unique("O"), total: 7 } });
    try {
      // The inline run of charge is at the destination, held.
      await until(() => h.dest.requests.length === 1);
      const { results } = await env.DB.prepare("SELECT id FROM executions WHERE workspace = ?1 AND workflow_id = ?2")
        .bind(WS, wf.workflowId)
        .all<{ id: string }>();
      const id = results[0]!.id;
      expect((await stepsOf(id)).charge).toMatchObject({ state: "EXECUTING", epoch: 1 });
      // A duplicate message for charge while the chained claim's lease is live: not claimed, nothing sent.
      const dup = await h.deliver([{ executionId: id, vertexId: "charge" }]);
      expect(dup.explicitAcks.length + dup.retryMessages.length).toBe(1);
      expect(h.dest.requests).toHaveLength(1);
      expect((await stepsOf(id)).charge!.epoch).toBe(1);
      // The lease runs out while the destination still holds the chained run: a redelivery takes over
      // (epoch 2, without chaining: its settle leaves done DISPATCHED, with a message) and finishes first.
      h.clock.advance(11_000);
      h.dest.hold = null;
      await h.deliver([{ executionId: id, vertexId: "charge" }], { chain: null });
      expect((await stepsOf(id)).charge).toMatchObject({ state: "COMPLETED", epoch: 2 });
      expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: id, vertexId: "done" }]);
      // Now the chained run (epoch 1) gets its answer (the destination replays it for the same key) and
      // settles: fenced out, so it writes nothing and claims nothing — done is still fresh and waits for its message.
      release();
      await started;
      expect((await stepsOf(id)).done).toMatchObject({ state: "DISPATCHED", epoch: 0, attempt: 0 });
      await h.drain();
      const steps = await stepsOf(id);
      expect(steps.charge).toMatchObject({ state: "COMPLETED", epoch: 2 });
      expect(steps.done!.state).toBe("COMPLETED");
      expect(await executionStatus(id)).toBe("COMPLETED");
      // One charge; both runs sent the same key, so the destination's ledger deduplicated the second.
      expect(h.dest.effects.filter((e) => e.path === "/payments/charges")).toHaveLength(1);
      expect(new Set(h.dest.keysSent("/payments/charges"))).toEqual(new Set([steps.charge!.idempotency_key]));
      // The chained run (epoch 1) did not settle: its attempt is on record as lost, not completed.
      const { results: attempts } = await env.DB.prepare(
        "SELECT epoch, outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id = 'charge' ORDER BY epoch",
      )
        .bind(id)
        .all<{ epoch: number; outcome: string }>();
      expect(attempts[0]).toEqual({ epoch: 1, outcome: "lost" });
      expect(attempts.filter((a) => a.outcome === "completed")).toHaveLength(1);
    } finally {
      release();
    }
  });

  it("a crash after the chained claim, before the run: EXECUTING under its lease, re-dispatched by one reaper pass after it", async () => {
    let crashed = 0;
    const h = harness(
      {
        beforeChainedRun: () => {
          if (crashed++ === 0) throw new Error("isolate gone after the chained claim");
        },
      },
      { chain: { leaseMs: 30_000 } },
    );
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 9 } });
    expect(crashed).toBe(1);
    // The key was persisted with the claim, before the crash: the re-run sends the same one.
    const claimed = (await stepsOf(id)).charge!;
    expect(claimed).toMatchObject({ state: "EXECUTING", epoch: 1, attempt: 1 });
    expect(claimed.idempotency_key).not.toBeNull();
    expect(h.dest.requests).toHaveLength(0);
    expect(h.queue.sends).toBe(0);
    // Within the lease the reaper leaves it alone.
    h.clock.advance(29_000);
    expect((await reap(h.rt)).expiredLeases).toBe(0);
    expect(h.queue.pending).toHaveLength(0);
    // One reaper pass after the lease re-dispatches it.
    h.clock.advance(2_000);
    expect((await reap(h.rt)).expiredLeases).toBe(1);
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: id, vertexId: "charge" }]);
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge).toMatchObject({ state: "COMPLETED" });
    expect(steps.done).toMatchObject({ state: "COMPLETED" });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1);
    expect(h.dest.keysSent("/payments/charges")).toEqual([claimed.idempotency_key]);
  });

  it("the step budget exhausted: the rest goes to the queue", async () => {
    const h = harness({}, { chain: { maxSteps: 1 } });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    // charge ran inline (the one step of the budget); done got a message.
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
    expect((await stepsOf(id)).done!.state).toBe("DISPATCHED");
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: id, vertexId: "done" }]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.queue.sends).toBe(1);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("a full queue batch of ten at the default budget chains once its messages settle (each then holds only its settle)", async () => {
    // Started without chaining: ten charge messages, delivered as one batch with chaining on at
    // the defaults (500 queries). Each message holds its step and heartbeats (70) while it runs —
    // 700 for ten — and only its settle once it settles, so the later settles chain their `done`.
    const h = harness({ heartbeatEveryMs: undefined });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(await h.start(wf, { order: { id: unique("O"), total: i + 1 } }));
    const bodies = h.queue.pending.splice(0).map((p) => p.body);
    expect(bodies).toHaveLength(10);
    await h.deliver(bodies, { chain: { ...DEFAULT_CHAIN } });
    const queuedDone = h.queue.pending.filter((p) => (p.body as StepMessage).vertexId === "done").length;
    const chainedDone = (await Promise.all(ids.map((id) => stepsOf(id)))).filter((s) => s.done?.state === "COMPLETED").length;
    expect(chainedDone).toBeGreaterThan(0);
    expect(chainedDone + queuedDone).toBe(10);
    await h.drain();
    for (const id of ids) expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(10);
  });

  it("the query budget exhausted: the rest goes to the queue", async () => {
    // Enough for one step's reserve at the start (40 + 3 vertices), not once the start batch and the key persist were sent.
    const h = harness({}, { chain: { maxQueries: 45 } });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
    expect((await stepsOf(id)).done!.state).toBe("DISPATCHED");
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: id, vertexId: "done" }]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("a step whose timeout does not fit the inline window is queued, not run inline", async () => {
    const h = harness({}, { chain: { inlineWindowMs: 5_000 } });
    // 10 s timeout + the 2 s margin > a 5 s window.
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf"), { timeoutMs: 10_000 }));
    const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    expect(h.dest.requests).toHaveLength(0);
    expect((await stepsOf(id)).charge).toMatchObject({ state: "DISPATCHED", epoch: 0, attempt: 0 });
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: id, vertexId: "charge" }]);
    // From its message, the consumer runs charge and chains done (its budget is the invocation's, 60 s).
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.queue.sends).toBe(1);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("a fan-out: the settle claims one ready successor, the other gets its message; the fan-in runs once", async () => {
    const h = harness({}, { chain: true });
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "in", type: "ENTRY_POINT", config: {} },
        { id: "a", type: "TRANSFORM", config: { output: { n: "= payload.n" } } },
        { id: "b", type: "TRANSFORM", config: { output: { n: "= steps.a.n + 1" } } },
        { id: "c", type: "TRANSFORM", config: { output: { n: "= steps.a.n + 2" } } },
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
    const id = await h.start(wf, { n: 10 });
    // a ran inline and its settle chained b (first in order); c got a message; join waits for c.
    const after = await stepsOf(id);
    expect(after.a!.state).toBe("COMPLETED");
    expect(after.b!.state).toBe("COMPLETED");
    expect(after.c).toMatchObject({ state: "DISPATCHED", attempt: 0 });
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: id, vertexId: "c" }]);
    // c's message runs c, whose settle makes join ready and chains it.
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.join).toMatchObject({ state: "COMPLETED", attempt: 1 });
    expect(JSON.parse(steps.join!.output!)).toEqual({ n: 23 });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.queue.sends).toBe(1);
  });

  it("a trigger sent twice at once with the same client id: one execution, one inline run, one charge", async () => {
    const h = harness({}, { chain: true });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const inline: Array<Promise<unknown>> = [];
    const deps: IngressDeps = {
      db: h.rt.db,
      queue: h.queue as unknown as Queue<StepMessage>,
      now: h.clock.now,
      chain: { runtime: h.rt, waitUntil: (work) => inline.push(work) },
    };
    const payload = { order: { id: unique("O"), total: 4 } };
    const trigger = () =>
      startWorkflowExecution(deps, {
        workflow: wf,
        triggerKind: "webhook",
        payload,
        identity: { kind: "client", material: "same-client-id", scope: "production" },
      });
    const [first, second] = await Promise.all([trigger(), trigger()]);
    await Promise.all(inline);
    expect(first.executionId).toBe(second.executionId);
    expect([first.deduplicated, second.deduplicated].sort()).toEqual([false, true]);
    expect(inline).toHaveLength(1);
    expect(await executionStatus(first.executionId)).toBe("COMPLETED");
    expect(h.dest.requests).toHaveLength(1);
    expect(h.dest.effects).toHaveLength(1);
    expect(h.queue.sends).toBe(0);
  });

  it("the trigger route hands its ExecutionContext on: with CHAIN_STEPS on, it finishes under waitUntil, no message", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", {
      id: unique("wf"),
      vertices: [
        { id: "in", type: "ENTRY_POINT", config: {} },
        { id: "a", type: "TRANSFORM", config: { output: { n: "= payload.n + 1" } } },
        { id: "b", type: "TRANSFORM", config: { output: { n: "= steps.a.n * 2" } } },
      ],
      edges: [
        { from: "in", to: "a" },
        { from: "a", to: "b" },
      ],
    } as WorkflowDefinitionInput);
    const ctx = createExecutionContext();
    const response = await app.fetch(
      new Request(`http://idemflow.test/v1/workflows/${wf.workflowId}/trigger`, {
        method: "POST",
        headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
        body: JSON.stringify({ n: 1 }),
      }),
      { ...env, QUEUE: h.queue, CHAIN_STEPS: "on" },
      ctx,
    );
    expect(response.status).toBe(202);
    const { executionId } = (await response.json()) as { executionId: string };
    await waitOnExecutionContext(ctx);
    expect(await executionStatus(executionId)).toBe("COMPLETED");
    expect(JSON.parse((await stepsOf(executionId)).b!.output!)).toEqual({ n: 4 });
    expect(h.queue.sends).toBe(0);
  });

  it("CHAIN_INLINE_MAX: past the isolate's inline runs the first step is queued; each slot comes back, a duplicate's at once", async () => {
    const h = harness({}, { chain: { inlineMax: 1 } });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    expect(inlineRunsInFlight()).toBe(0);
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const firstPayload = { order: { id: unique("O"), total: 3 } };
    const first = h.start(wf, firstPayload);
    try {
      // The first trigger's inline run holds the only slot (its charge is at the destination).
      await until(() => h.dest.requests.length === 1);
      expect(inlineRunsInFlight()).toBe(1);
      // A second trigger meanwhile: no slot, so its first step gets a message and runs nothing inline.
      const second = await h.start(wf, { order: { id: unique("O"), total: 4 } });
      expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: second, vertexId: "charge" }]);
      expect((await stepsOf(second)).charge).toMatchObject({ state: "DISPATCHED", epoch: 0 });
      expect(inlineRunsInFlight()).toBe(1);
    } finally {
      h.dest.hold = null;
      release();
    }
    const firstId = await first;
    expect(await executionStatus(firstId)).toBe("COMPLETED");
    expect(inlineRunsInFlight()).toBe(0);
    // A start and its duplicate (same client id): the duplicate takes the slot for its start batch
    // and, claiming nothing, gives it back at once.
    const inline: Array<Promise<unknown>> = [];
    const deps: IngressDeps = {
      db: h.rt.db,
      queue: h.queue as unknown as Queue<StepMessage>,
      now: h.clock.now,
      chain: { runtime: h.rt, waitUntil: (work) => inline.push(work) },
    };
    const identity = { kind: "client", material: unique("client-id"), scope: "production" } as const;
    const request = { workflow: wf, triggerKind: "webhook", payload: { order: { id: unique("O"), total: 6 } }, identity } as const;
    const original = await startWorkflowExecution(deps, request);
    await Promise.all(inline.splice(0));
    expect(inlineRunsInFlight()).toBe(0);
    const duplicate = await startWorkflowExecution(deps, request);
    expect(duplicate).toMatchObject({ executionId: original.executionId, deduplicated: true });
    expect(inline).toHaveLength(0);
    expect(inlineRunsInFlight()).toBe(0);
    // The slot is free again: the next trigger runs inline, with no message.
    const sendsBefore = h.queue.sends;
    const third = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    expect(await executionStatus(third)).toBe("COMPLETED");
    expect(h.queue.sends).toBe(sendsBefore);
    expect(inlineRunsInFlight()).toBe(0);
    await h.drain();
    expect(h.dest.effects).toHaveLength(4);
  });

  it("reads CHAIN_INLINE_MAX and CHAIN_INLINE_MAX_BYTES from the vars; 64 runs and 16 MiB by default", () => {
    expect(chainConfigFromEnv({})).toMatchObject({ inlineMax: 64, inlineMaxBytes: 16 * 1024 * 1024 });
    expect(chainConfigFromEnv({ CHAIN_INLINE_MAX: "8", CHAIN_INLINE_MAX_BYTES: "1024" })).toMatchObject({
      inlineMax: 8,
      inlineMaxBytes: 1024,
    });
    expect(chainConfigFromEnv({ CHAIN_INLINE_MAX_BYTES: "lots" })).toMatchObject({ inlineMaxBytes: 16 * 1024 * 1024 });
  });

  it("CHAIN_INLINE_MAX_BYTES: past the payload the isolate's inline runs hold, the first step is queued; the bytes come back", async () => {
    const payload = (id: string, pad: number) => ({ order: { id, total: 3 }, note: "x".repeat(pad) });
    const big = payload(unique("O"), 400);
    const bigBytes = JSON.stringify(big).length;
    // Room for the big payload alone, not for a small one beside it.
    const h = harness({}, { chain: { inlineMaxBytes: bigBytes + 10 } });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    expect(inlineBytesInFlight()).toBe(0);
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const first = h.start(wf, big);
    try {
      await until(() => h.dest.requests.length === 1);
      expect(inlineRunsInFlight()).toBe(1);
      expect(inlineBytesInFlight()).toBe(bigBytes);
      // A small payload does not fit beside it: queued, nothing run inline.
      const second = await h.start(wf, payload(unique("O"), 0));
      expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: second, vertexId: "charge" }]);
      expect(inlineBytesInFlight()).toBe(bigBytes);
    } finally {
      h.dest.hold = null;
      release();
    }
    expect(await executionStatus(await first)).toBe("COMPLETED");
    expect(inlineRunsInFlight()).toBe(0);
    expect(inlineBytesInFlight()).toBe(0);
    // A payload over the bound by itself is never run inline, even by an idle isolate.
    const sendsBefore = h.queue.sends;
    const over = await h.start(wf, payload(unique("O"), 500));
    expect(h.queue.sends).toBe(sendsBefore + 1);
    expect(inlineBytesInFlight()).toBe(0);
    await h.drain();
    expect(await executionStatus(over)).toBe("COMPLETED");
    // Under the bound again: the next trigger runs inline, with no message.
    const sendsAfter = h.queue.sends;
    const small = await h.start(wf, payload(unique("O"), 0));
    expect(await executionStatus(small)).toBe("COMPLETED");
    expect(h.queue.sends).toBe(sendsAfter);
    expect(h.dest.effects).toHaveLength(4);
  });

  it("a duplicate start with chaining on claims nothing: the identity guard leaves the first start's step to its message", async () => {
    // The first start without chaining: charge stays DISPATCHED with its message.
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const identity = { kind: "client", material: unique("client-id"), scope: "production" } as const;
    const unchained: IngressDeps = { db: env.DB, queue: h.queue as unknown as Queue<StepMessage>, now: h.clock.now };
    const firstOrder = unique("O");
    const first = await startWorkflowExecution(unchained, {
      workflow: wf,
      triggerKind: "webhook",
      payload: { order: { id: firstOrder, total: 11 } },
      identity,
    });
    expect(first.deduplicated).toBe(false);
    // The duplicate with chaining on: its start batch offers charge, but it did not win the identity.
    const inline: Array<Promise<unknown>> = [];
    const dup = await startWorkflowExecution(chainedIngress(h, inline), {
      workflow: wf,
      triggerKind: "webhook",
      payload: { order: { id: unique("O"), total: 99 } },
      identity,
    });
    await Promise.all(inline);
    expect(dup).toMatchObject({ executionId: first.executionId, deduplicated: true });
    expect(inline).toHaveLength(0);
    expect((await stepsOf(first.executionId)).charge).toMatchObject({ state: "DISPATCHED", epoch: 0, attempt: 0 });
    expect(h.dest.requests).toHaveLength(0);
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: first.executionId, vertexId: "charge" }]);
    // The message runs charge once, with the first start's payload.
    await h.drain();
    expect(await executionStatus(first.executionId)).toBe("COMPLETED");
    expect((await stepsOf(first.executionId)).charge).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(h.dest.effects).toHaveLength(1);
    expect(h.dest.effects[0]!.body).toEqual({ order: firstOrder, amount: 11 });
  });

  it("one budget for the whole queue batch: with CHAIN_MAX_STEPS 1, two settles in flight at once chain one successor", async () => {
    // Both charge calls are held until both reached the destination, so the two settles ask the budget
    // while neither batch has committed: an offer must reserve its step, not count it once it ran.
    let arrived = 0;
    let bothArrived!: () => void;
    const barrier = new Promise<void>((r) => (bothArrived = r));
    const h: Harness = harness({
      fetch: async (input, init) => {
        if (++arrived === 2) bothArrived();
        await barrier;
        return h.dest.fetch(input, init);
      },
    });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const a = await h.start(wf, { order: { id: unique("O"), total: 1 } });
    const b = await h.start(wf, { order: { id: unique("O"), total: 2 } });
    const messages = h.queue.take().map((m) => m.body);
    expect(messages).toEqual([
      { executionId: a, vertexId: "charge" },
      { executionId: b, vertexId: "charge" },
    ]);
    // One batch of both charge messages; each settle would chain its done.
    const delivery = await h.deliver(messages, { chain: { ...DEFAULT_CHAIN, maxSteps: 1 } });
    expect(delivery.explicitAcks).toHaveLength(2);
    const done = [(await stepsOf(a)).done!, (await stepsOf(b)).done!];
    expect(done.map((d) => d.state).sort()).toEqual(["COMPLETED", "DISPATCHED"]);
    const queued = done[0]!.state === "DISPATCHED" ? a : b;
    expect(done.find((d) => d.state === "DISPATCHED")).toMatchObject({ epoch: 0, attempt: 0 });
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: queued, vertexId: "done" }]);
    await h.drain();
    expect([await executionStatus(a), await executionStatus(b)]).toEqual(["COMPLETED", "COMPLETED"]);
    expect(h.dest.effects).toHaveLength(2);
  });

  it("a chained step that ran gives its held queries back: a linear chain runs on as far as the queries really sent allow", async () => {
    // entry → a → b → c, four vertices: an offer holds 40 + 4 = 44 queries. The settle of b offers c
    // while b's own 44 are held: queries sent so far + 88 fit in 128, + 132 (a's never given back) do not.
    const h = harness({}, { chain: { maxQueries: 128 } });
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "in", type: "ENTRY_POINT", config: {} },
        { id: "a", type: "TRANSFORM", config: { output: { n: "= payload.n + 1" } } },
        { id: "b", type: "TRANSFORM", config: { output: { n: "= steps.a.n + 1" } } },
        { id: "c", type: "TRANSFORM", config: { output: { n: "= steps.b.n + 1" } } },
      ],
      edges: [
        { from: "in", to: "a" },
        { from: "a", to: "b" },
        { from: "b", to: "c" },
      ],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, { n: 1 });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(JSON.parse((await stepsOf(id)).c!.output!)).toEqual({ n: 4 });
    expect(h.queue.sends).toBe(0);
  });

  it("an offer the settle did not claim (a fan-in not ready yet) is given back: the batch's next settle chains it", async () => {
    // entry → quick, entry → charge; quick → join, charge → join. One batch of both first steps with
    // CHAIN_MAX_STEPS 1: quick settles first and offers join, not ready (charge is held at the
    // destination); charge settles next and its offer of join, now ready, must still fit the budget.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const h: Harness = harness({
      fetch: async (input, init) => {
        await held;
        return h.dest.fetch(input, init);
      },
    });
    const definition = chargeWorkflow(unique("wf"));
    definition.vertices.push(
      { id: "quick", type: "TRANSFORM", config: { output: { ok: true } } },
      { id: "join", type: "TRANSFORM", config: { output: { quick: "= steps.quick.ok", charged: "= steps.charge.body.id" } } },
    );
    definition.vertices = definition.vertices.filter((v) => v.id !== "done");
    definition.edges = [
      { from: "received", to: "charge" },
      { from: "received", to: "quick" },
      { from: "quick", to: "join" },
      { from: "charge", to: "join" },
    ];
    const wf = await seedWorkflow(WS, definition);
    const id = await h.start(wf, { order: { id: unique("O"), total: 9 } });
    const messages = h.queue.take().map((m) => m.body);
    expect(messages).toHaveLength(2);
    const delivery = h.deliver(messages, { chain: { ...DEFAULT_CHAIN, maxSteps: 1 } });
    // quick has settled (its offer of join claimed nothing) before charge is let through.
    const end = Date.now() + 5_000;
    while ((await stepsOf(id)).quick?.state !== "COMPLETED") {
      if (Date.now() > end) throw new Error("quick did not settle");
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((await stepsOf(id)).join?.epoch ?? 0).toBe(0);
    release();
    expect((await delivery).explicitAcks).toHaveLength(2);
    const steps = await stepsOf(id);
    expect(steps.join).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(JSON.parse(steps.join!.output!)).toEqual({ quick: true, charged: "ch_1" });
    expect(h.queue.pending).toHaveLength(0);
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1);
  });

  it("CHAIN_MAX_MS: a successor whose timeout ends past the batch's deadline is queued; with a later deadline it is chained", async () => {
    // entry → prep (a transform) → charge (Gateway, 10 s timeout) → done.
    const definition = chargeWorkflow(unique("wf"));
    definition.vertices.splice(1, 0, { id: "prep", type: "TRANSFORM", config: { output: { ok: true } } });
    definition.edges = [
      { from: "received", to: "prep" },
      { from: "prep", to: "charge" },
      { from: "charge", to: "done" },
    ];
    const wf = await seedWorkflow(WS, definition);
    const h = harness();
    const run = async (maxMs: number) => {
      const id = await h.start(wf, { order: { id: unique("O"), total: 6 } });
      const [message] = h.queue.take();
      expect(message!.body).toEqual({ executionId: id, vertexId: "prep" });
      await h.deliver([message!.body], { chain: { ...DEFAULT_CHAIN, maxMs } });
      return id;
    };
    // The clock stands still: the deadline is now + 5 s, charge needs now + 10 s + the 2 s margin.
    const refused = await run(5_000);
    expect((await stepsOf(refused)).prep!.state).toBe("COMPLETED");
    expect((await stepsOf(refused)).charge).toMatchObject({ state: "DISPATCHED", epoch: 0, attempt: 0 });
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: refused, vertexId: "charge" }]);
    expect(h.dest.requests).toHaveLength(0);
    h.queue.take();
    // Exactly 10 s + 2 s: charge and done are chained, no message.
    const chained = await run(12_000);
    expect((await stepsOf(chained)).charge).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(await executionStatus(chained)).toBe("COMPLETED");
    expect(h.queue.pending).toHaveLength(0);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("a chained step with a dynamic reference reads its inputs after the commit: one round trip more, the right output", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db }, { chain: true });
    const definition = chargeWorkflow(unique("wf"));
    definition.vertices[2] = { id: "done", type: "TRANSFORM", config: { output: { charged: "= $lookup(steps, 'charge').body.id" } } };
    const wf = await seedWorkflow(WS, definition);
    counting.reset();
    const id = await h.start(wf, { order: { id: unique("O"), total: 8 } });
    // start batch + claim of charge with its key; settle of charge + claim of done; done's inputs; settle of done.
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "statement", "batch"]);
    expect(counting.roundTrips()).toBe(4);
    expect(h.queue.sends).toBe(0);
    const steps = await stepsOf(id);
    expect(steps.done).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(JSON.parse(steps.done!.output!)).toEqual({ charged: "ch_1" });
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("a chained claim's heartbeat runs every third of CHAIN_LEASE_MS and extends the lease by it", async () => {
    // The real heartbeat (the harness turns it off); the step lease stays 30 s, the chained one is 3 s.
    // The fake clock moves on by 500 ms when the request reaches the destination, before the first heartbeat (1 s of real time).
    const h: Harness = harness(
      {
        heartbeatEveryMs: undefined,
        fetch: (input, init) => {
          h.clock.advance(500);
          return h.dest.fetch(input, init);
        },
      },
      { chain: { leaseMs: 3_000 } },
    );
    expect(h.rt.leaseMs).toBe(30_000);
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const claimedAt = h.clock.now();
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const started = h.start(wf, { order: { id: unique("O"), total: 5 } });
    try {
      await until(() => h.dest.requests.length === 1);
      const end = Date.now() + 1_500;
      const { results } = await env.DB.prepare("SELECT id FROM executions WHERE workspace = ?1 AND workflow_id = ?2")
        .bind(WS, wf.workflowId)
        .all<{ id: string }>();
      const id = results[0]!.id;
      const leaseUntil = async () =>
        (await env.DB.prepare("SELECT lease_until FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
          .bind(id)
          .first<number>("lease_until"))!;
      // The chained claim's lease; then the first heartbeat's: the clock's now + 3 s.
      let lease = await leaseUntil();
      expect(lease).toBe(claimedAt + 3_000);
      while (lease === claimedAt + 3_000 && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 20));
        lease = await leaseUntil();
      }
      expect(lease).toBe(claimedAt + 500 + 3_000);
    } finally {
      release();
      await started;
    }
    expect(h.dest.effects).toHaveLength(1);
  });

  it("a fan-in whose predecessor is named `constructor`, `toString` or `valueOf` gets its stored output, not a built-in", async () => {
    // in → a → {first, second} → join. a's settle chains `first`; `second` runs from its message,
    // and its settle chains join, which reads `first` — an output that invocation never held.
    for (const [first, second] of [
      ["constructor", "toString"],
      ["toString", "valueOf"],
    ] as const) {
      const h = harness({}, { chain: true });
      const wf = await seedWorkflow(WS, {
        id: unique("wf"),
        vertices: [
          { id: "in", type: "ENTRY_POINT", config: {} },
          { id: "a", type: "TRANSFORM", config: { output: { n: "= payload.n" } } },
          { id: first, type: "TRANSFORM", config: { output: { n: "= steps.a.n + 1" } } },
          { id: second, type: "TRANSFORM", config: { output: { n: "= steps.a.n + 2" } } },
          { id: "join", type: "TRANSFORM", config: { output: { n: `= steps.${first}.n + steps.${second}.n` } } },
        ],
        edges: [
          { from: "in", to: "a" },
          { from: "a", to: first },
          { from: "a", to: second },
          { from: first, to: "join" },
          { from: second, to: "join" },
        ],
      } as WorkflowDefinitionInput);
      const id = await h.start(wf, { n: 10 });
      expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId: id, vertexId: second }]);
      await h.drain();
      const steps = await stepsOf(id);
      expect(steps.join, first).toMatchObject({ state: "COMPLETED", attempt: 1 });
      expect(JSON.parse(steps.join!.output!), first).toEqual({ n: 23 });
      expect(h.queue.sends).toBe(1); // join was chained, not sent
    }
  });

  it("the start batch's key is the key the step computes itself, for a key expression reading execution.trigger", async () => {
    const definition = () =>
      chargeWorkflow(unique("wf"), {
        headers: {
          "Idempotency-Key": "= $idempotencyKey('charge', payload.order.id, execution.trigger)",
          Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}",
        },
      });
    const payload = { order: { id: unique("O"), total: 5 } };
    // Unchained: the step computes its key when it runs from its message.
    const plain = harness();
    const plainId = await plain.start(await seedWorkflow(WS, definition()), payload);
    await plain.drain();
    const plainKey = (await stepsOf(plainId)).charge!.idempotency_key;
    expect(plainKey).toMatch(/^charge-/);
    // Chained: the trigger computes it before the start batch (a "test" trigger with a forced identity).
    let persisted: string | null = null;
    const h = harness(
      {
        beforeChainedRun: async (fence) => {
          if (fence.vertexId !== "charge") return;
          const row = await env.DB.prepare("SELECT idempotency_key AS key FROM steps WHERE execution_id = ?1 AND vertex_id = ?2")
            .bind(fence.executionId, fence.vertexId)
            .first<{ key: string | null }>();
          persisted = row!.key;
        },
      },
      { chain: true },
    );
    const id = await h.start(await seedWorkflow(WS, definition()), payload);
    expect(persisted).toBe(plainKey);
    expect((await stepsOf(id)).charge).toMatchObject({ state: "COMPLETED", idempotency_key: plainKey });
    expect(h.dest.keysSent("/payments/charges")).toEqual([plainKey]);
  });

  it("an inline run that never ends (its waitUntil cancelled) stops holding its slot at its deadline, the inline window", async () => {
    const h = harness({}, { chain: { inlineMax: 1 } });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const inline: Array<Promise<unknown>> = [];
    const deps: IngressDeps = {
      db: h.rt.db,
      queue: h.queue as unknown as Queue<StepMessage>,
      now: h.clock.now,
      chain: { runtime: h.rt, waitUntil: (work) => inline.push(work) },
    };
    const start = async () =>
      (
        await startWorkflowExecution(deps, {
          workflow: wf,
          triggerKind: "test",
          payload: { order: { id: unique("O"), total: 2 } },
          identity: { kind: "forced" },
        })
      ).executionId;
    expect(inlineRunsInFlight()).toBe(0);
    // The first run's call never comes back (as if the platform had cut its waitUntil): its finally never runs.
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    await start();
    await until(() => h.dest.requests.length === 1);
    expect(inlineRunsInFlight()).toBe(1);
    // Within its window it holds the only slot: the next first steps are queued.
    const queuedNow = await start();
    h.clock.advance(DEFAULT_CHAIN.inlineWindowMs);
    const queuedAtDeadline = await start();
    expect(h.queue.take().map((p) => p.body)).toEqual([
      { executionId: queuedNow, vertexId: "charge" },
      { executionId: queuedAtDeadline, vertexId: "charge" },
    ]);
    // Past its deadline it no longer counts: the next trigger runs its first step inline.
    h.clock.advance(1);
    h.dest.hold = null;
    const ranInline = await start();
    expect(inline).toHaveLength(2);
    await inline[1];
    expect(await executionStatus(ranInline)).toBe("COMPLETED");
    expect(h.queue.pending).toHaveLength(0);
    expect(inlineRunsInFlight()).toBe(0);
    // The stalled run ends at last: giving back a slot it no longer holds changes nothing.
    release();
    await inline[0];
    expect(inlineRunsInFlight()).toBe(0);
  });

  it("CHAIN_INLINE_MAX_BYTES counts the stored JSON's UTF-8 bytes, not its UTF-16 code units", async () => {
    const payload = { order: { id: unique("O"), total: 3 }, note: "é".repeat(200) };
    const json = JSON.stringify(payload);
    const bytes = new TextEncoder().encode(json).byteLength;
    expect(bytes).toBe(json.length + 200);
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    // Room for its code units, one byte short of its bytes: over the bound by itself, so queued.
    const short = harness({}, { chain: { inlineMaxBytes: bytes - 1 } });
    const queued = await short.start(wf, payload);
    expect(short.queue.pending.map((p) => p.body)).toEqual([{ executionId: queued, vertexId: "charge" }]);
    expect(short.dest.requests).toHaveLength(0);
    // Room for its bytes: run inline, holding exactly that many while it runs.
    const room = harness({}, { chain: { inlineMaxBytes: bytes } });
    let release!: () => void;
    room.dest.hold = new Promise<void>((r) => (release = r));
    const run = room.start(wf, { ...payload, order: { id: unique("O"), total: 3 } });
    try {
      await until(() => room.dest.requests.length === 1);
      expect(inlineBytesInFlight()).toBe(bytes);
    } finally {
      room.dest.hold = null;
      release();
    }
    expect(await executionStatus(await run)).toBe("COMPLETED");
    expect(room.queue.sends).toBe(0);
    expect(inlineBytesInFlight()).toBe(0);
  });

  it("a cancel after the trigger's answer, before the inline first step's call, does not stop it: fenced out at its settle", async () => {
    // docs/steps.md, the cancel in "Operator actions and API": with its key persisted in the start
    // batch, the inline first step makes no fenced write before it sends; the cancel names the
    // step as in flight, with that key.
    let cancelled: CancelResult | null = null;
    const h: Harness = harness(
      {
        beforeChainedRun: async (fence) => {
          // The first execution's first step only (not its start over's).
          if (cancelled === null) cancelled = await cancelExecution(env.DB, WS, fence.executionId, h.clock.now());
        },
      },
      { chain: true },
    );
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const payload = { order: { id: unique("O"), total: 7 } };
    const id = await h.start(wf, payload);
    const steps = await stepsOf(id);
    const key = steps.charge!.idempotency_key;
    expect(key).toMatch(/^charge-/);
    expect(cancelled).toEqual({
      cancelled: true,
      inFlight: [{ vertexId: "charge", state: "EXECUTING", idempotencyKey: key }],
      identityReleased: false,
      compensating: false, // a cancel compensates only when asked
    });
    // The call went out once, with the key; its result is fenced out, nothing runs after it.
    expect(h.dest.keysSent("/payments/charges")).toEqual([key]);
    expect(h.dest.effects).toHaveLength(1);
    expect(steps.charge).toMatchObject({ state: "CANCELLED", epoch: 2, output: null });
    expect(steps.done).toBeUndefined();
    expect(await executionStatus(id)).toBe("CANCELLED");
    const fencedOut = await env.DB.prepare(
      "SELECT count(*) AS n FROM step_events WHERE execution_id = ?1 AND vertex_id = 'charge' AND type = 'fenced_out' AND epoch = 1",
    )
      .bind(id)
      .first<{ n: number }>();
    expect(fencedOut!.n).toBe(1);
    expect(h.queue.sends).toBe(0);
    // The key makes a start over safe: the destination replays the call it already took.
    const over = await h.startOver(wf, payload, id);
    await h.drain();
    expect(await executionStatus(over.executionId)).toBe("COMPLETED");
    expect(h.dest.keysSent("/payments/charges")).toEqual([key, key]);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("off unless opted in: the same execution takes one message per step", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 1 } });
    expect(h.dest.requests).toHaveLength(0);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.queue.sends).toBe(2);
  });
});
