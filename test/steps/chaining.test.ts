/**
 * Step chaining (src/steps/chain.ts, src/ledger/chain-claim.ts) against the real D1 and the real
 * demo destination (the Idempotency-Key ledger middleware): the start batch claims the first step
 * and the trigger runs it inline; each settle batch claims the next one. Proven here: the round
 * trips and queue messages of a chained execution, one side effect when a chained claim races a
 * redelivery or a takeover, recovery of a claimed step that never ran, and what goes back to the
 * queue when the budget or the inline window says so.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { app } from "../../src/app";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { startWorkflowExecution, type IngressDeps } from "../../src/ingress/start";
import type { StepMessage } from "../../src/steps/messages";
import { reap } from "../../src/steps/reaper";
import { countingD1 } from "../helpers/counting-d1";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-chaining";

/** Wait (real time) until `done()` holds: the inline run goes on after `start` was called. */
async function until(done: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("step chaining", () => {
  it("runs entry → charge → done in the trigger's invocation: 4 D1 round trips, no queue message", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db }, { chain: true });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    counting.reset();
    const id = await h.start(wf, { order: { id: unique("O"), total: 42 } });
    // start batch + chained claim of charge; persist key; settle of charge + chained claim of done; settle of done.
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "batch", "batch"]);
    expect(counting.roundTrips()).toBe(4);
    expect(h.queue.sends).toBe(0);
    expect(h.queue.pending).toHaveLength(0);
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
    expect((await stepsOf(id)).charge).toMatchObject({ state: "EXECUTING", epoch: 1, attempt: 1 });
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
