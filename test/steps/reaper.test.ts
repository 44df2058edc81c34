import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { claimAndLoad, redispatchOverdue } from "../../src/ledger";
import { handleStepBatch } from "../../src/steps/consumer";
import { reap } from "../../src/steps/reaper";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-reaper";

describe("the reaper", () => {
  it("re-sends a step whose message was lost after the commit; the step completes once", async () => {
    const h = harness({ overdueMs: 60_000 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    h.queue.take(); // the message is lost
    // Not overdue yet: nothing is re-sent.
    h.clock.advance(30_000);
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 0 });
    h.clock.advance(31_000);
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 1 });
    // A second sweep right away does not re-send it again (available_at moved to now).
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 0 });
    await h.drain();
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1);
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("re-dispatches an EXECUTING step whose lease expired; the dead worker is fenced out", async () => {
    const h = harness({ leaseMs: 5_000 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    h.queue.take();
    const ref = { executionId: id, vertexId: "charge" };
    await claimAndLoad(env.DB, ref, h.clock.now(), 5_000); // a worker claims, then dies
    h.clock.advance(4_000);
    expect((await reap(h.rt)).expiredLeases).toBe(0);
    h.clock.advance(2_000);
    expect((await reap(h.rt)).expiredLeases).toBe(1);
    expect((await stepsOf(id)).charge!.state).toBe("DISPATCHED");
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("COMPLETED");
    expect(step.epoch).toBe(2);
  });

  it("sweeps are bounded: at most `limit` rows per statement, overdue ones first", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await h.start(wf, { order: { id: unique("O"), total: i } }));
      h.clock.advance(1);
    }
    h.queue.take();
    const now = h.clock.now() + 120_000;
    const first = await redispatchOverdue(env.DB, now, 60_000, 2);
    expect(first).toHaveLength(2);
    const rest = await redispatchOverdue(env.DB, now, 60_000, 10);
    expect(rest.map((r) => r.executionId).sort()).toEqual(ids.filter((x) => !first.some((f) => f.executionId === x)).sort());
  });
});

describe("the dead-letter queue", () => {
  it("records every message that reaches it, and an event on its step", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    const batch = createMessageBatch<unknown>("idemflow-steps-dlq", [
      { id: "dlq-1", timestamp: new Date(), attempts: 11, body: { executionId: id, vertexId: "charge" } },
      { id: "dlq-2", timestamp: new Date(), attempts: 11, body: "not a step" },
    ]);
    const ctx = createExecutionContext();
    await handleStepBatch(batch, env, ctx, h.rt);
    const result = await getQueueResult(batch, ctx);
    expect(result.ackAll).toBe(true);
    const rows = await env.DB.prepare(
      "SELECT message_id, attempts FROM dead_letters WHERE message_id IN ('dlq-1', 'dlq-2') ORDER BY message_id",
    ).all();
    expect(rows.results).toEqual([
      { message_id: "dlq-1", attempts: 11 },
      { message_id: "dlq-2", attempts: 11 },
    ]);
    const events = await env.DB.prepare("SELECT type FROM step_events WHERE execution_id = ?1").bind(id).all<{ type: string }>();
    expect(events.results.map((e) => e.type)).toEqual(["dead_lettered"]);
  });
});
