import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import wranglerToml from "../../wrangler.toml?raw";
import { claimAndLoad, extendLease } from "../../src/ledger";
import { handleStepBatch } from "../../src/steps/consumer";
import { reap } from "../../src/steps/reaper";
import { DROP_REDELIVERY_AT_ATTEMPT, QUEUE_MAX_RETRIES } from "../../src/steps/redelivery";
import { countingD1 } from "../helpers/counting-d1";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-redelivery";

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => {});
  vi.spyOn(console, "error").mockImplementation(() => {});
});

async function eventsOf(executionId: string): Promise<Array<{ type: string; epoch: number | null; detail: string | null }>> {
  const { results } = await env.DB.prepare(
    "SELECT type, epoch, detail FROM step_events WHERE execution_id = ?1 AND vertex_id = 'charge' ORDER BY id",
  )
    .bind(executionId)
    .all<{ type: string; epoch: number | null; detail: string | null }>();
  return results;
}

/** Messages the reaper re-sent for this execution (it sweeps the whole per-file database). */
const resent = (h: Harness, executionId: string): number => h.queue.pending.filter((m) => m.body.executionId === executionId).length;

/** An execution whose `charge` step is EXECUTING under a claim made outside the consumer (another worker). */
async function heldByAnotherWorker(h: Harness, leaseMs: number) {
  const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
  const id = await h.start(wf, { order: { id: unique("O"), total: 7 } });
  const [msg] = h.queue.take();
  const ref = { executionId: id, vertexId: "charge" };
  const holder = await claimAndLoad(env.DB, ref, h.clock.now(), leaseMs);
  expect(holder.claimed?.epoch).toBe(1);
  return { id, ref, body: msg!.body, fence: { ...ref, epoch: holder.claimed!.epoch } };
}

describe("a message for a step that is EXECUTING under another worker's live lease", () => {
  it("on its first delivery is retried no sooner than the lease ends, and leaves no event", async () => {
    const h = harness({ leaseMs: 45_000 });
    const { id, body } = await heldByAnotherWorker(h, 45_000);
    h.clock.advance(10_000);
    const result = await h.deliver([body], {}, 1);
    expect(result.retryMessages).toHaveLength(1);
    expect(result.explicitAcks).toHaveLength(0);
    expect(result.retryDelays[0]).toBeGreaterThanOrEqual(35);
    expect(await eventsOf(id)).toEqual([]);
    expect(h.dest.requests).toHaveLength(0);
  });

  it("under a long call's live lease, bounces to the threshold, then acks with redelivery_dropped (no DLQ), in 1 round trip", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ leaseMs: 30_000, db: counting.db });
    const { id, body, fence } = await heldByAnotherWorker(h, 30_000);
    const outcomes: Array<{ attempts: number; outcome: "retried" | "acked" }> = [];
    // The queue redelivers the duplicate after each retry's delay; the holder heartbeats meanwhile.
    for (let attempts = 1; attempts <= QUEUE_MAX_RETRIES + 1; attempts++) {
      h.clock.advance(25_000);
      expect(await extendLease(env.DB, fence, h.clock.now(), 30_000)).toBe(true);
      counting.reset();
      const result = await h.deliver([body], {}, attempts);
      expect(counting.roundTrips()).toBe(1);
      if (result.explicitAcks.length === 1) {
        outcomes.push({ attempts, outcome: "acked" });
        break; // an acked message is never delivered again
      }
      expect(result.retryDelays[0]).toBeGreaterThanOrEqual(30);
      outcomes.push({ attempts, outcome: "retried" });
    }
    expect(outcomes.at(-1)).toEqual({ attempts: DROP_REDELIVERY_AT_ATTEMPT, outcome: "acked" });
    expect(outcomes.filter((o) => o.outcome === "retried")).toHaveLength(DROP_REDELIVERY_AT_ATTEMPT - 1);
    const events = await eventsOf(id);
    expect(events).toHaveLength(1);
    expect(events[0]!.type).toBe("redelivery_dropped");
    expect(events[0]!.epoch).toBe(1);
    expect(events[0]!.detail).toMatch(
      new RegExp(`delivery ${DROP_REDELIVERY_AT_ATTEMPT}\\).*EXECUTING under a live lease \\(epoch 1,.*reaper re-dispatches`),
    );
    // The healthy step was left alone: still the holder's, nothing sent by the duplicate.
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("EXECUTING");
    expect(step.epoch).toBe(1);
    expect(h.dest.requests).toHaveLength(0);
  });

  it(
    "once dropped, loses nothing: when the holder dies and its lease expires, the reaper re-dispatches the step and it " + "completes once",
    async () => {
      const h = harness({ leaseMs: 5_000 });
      const { id, body } = await heldByAnotherWorker(h, 5_000);
      h.clock.advance(1_000);
      const dropped = await h.deliver([body], {}, DROP_REDELIVERY_AT_ATTEMPT);
      expect(dropped.explicitAcks).toHaveLength(1);
      expect(dropped.retryMessages).toHaveLength(0);
      // The holder dies: no more heartbeats. No message for the step is left anywhere.
      expect(h.queue.pending).toHaveLength(0);
      h.clock.advance(3_000);
      await reap(h.rt);
      expect(resent(h, id)).toBe(0);
      h.clock.advance(2_000);
      await reap(h.rt);
      expect(resent(h, id)).toBe(1);
      await h.drain();
      const step = (await stepsOf(id)).charge!;
      expect(step.state).toBe("COMPLETED");
      expect(step.epoch).toBe(2);
      expect(h.dest.effects).toHaveLength(1);
      expect(await executionStatus(id)).toBe("COMPLETED");
      expect((await eventsOf(id)).map((e) => e.type)).toEqual(["redelivery_dropped", "lease_expired"]);
    },
  );
});

describe("a message for a DISPATCHED step that is not due yet (a long Retry-After)", () => {
  it("bounces early deliveries, acks with redelivery_dropped at the threshold; the reaper re-sends the step once overdue", async () => {
    const h = harness({ overdueMs: 60_000 });
    // Retry-After is honoured up to retry.maxDelayMs (at most 24 hours, src/steps/retry-policy.ts).
    const wf = await seedWorkflow(
      WS,
      chargeWorkflow(unique("wf"), { retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 100, maxDelayMs: 86_400_000 } }),
    );
    const orderId = unique("O");
    const id = await h.start(wf, { order: { id: orderId, total: 8 } });
    // The reaper sweeps the whole (per-file) database: count only this execution's calls.
    const calls = () => h.dest.requests.filter((r) => r.body.includes(orderId)).length;
    const aDay = 24 * 3_600_000; // the longest Retry-After a step honours
    h.dest.fault("/payments/charges", 503, 1, { headers: { "retry-after": String(aDay / 1000) } });
    const [first] = h.queue.take();
    const t0 = h.clock.now();
    await h.deliver([first!.body]);
    const [retry] = h.queue.take();
    h.clock.t = retry!.dueAt; // 12 hours: the queue's delay limit
    const early = await h.deliver([retry!.body], {}, 1);
    expect(early.retryDelays[0]).toBe(12 * 3600);
    h.clock.t = t0 + 20 * 3_600_000;
    const late = await h.deliver([retry!.body], {}, DROP_REDELIVERY_AT_ATTEMPT);
    expect(late.explicitAcks).toHaveLength(1);
    expect(late.retryMessages).toHaveLength(0);
    const dropped = (await eventsOf(id)).filter((e) => e.type === "redelivery_dropped");
    expect(dropped).toHaveLength(1);
    expect(dropped[0]!.detail).toContain(`not due until ${new Date(t0 + aDay).toISOString()}`);
    expect(calls()).toBe(1);
    // Due, then overdue: the reaper re-sends it and it completes.
    h.clock.t = t0 + aDay + 30_000;
    await reap(h.rt);
    expect((await stepsOf(id)).charge!.state).toBe("DISPATCHED");
    expect(resent(h, id)).toBe(0);
    h.clock.t = t0 + aDay + 60_000;
    await reap(h.rt);
    expect(resent(h, id)).toBe(1);
    await h.drain();
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
    expect(calls()).toBe(2);
    expect(h.dest.effects.filter((e) => JSON.stringify(e.body).includes(orderId))).toHaveLength(1);
  });
});

describe("the drop threshold only concerns waiting steps", () => {
  it("a much-redelivered message whose step is claimable runs it, and records no redelivery_dropped event", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 9 } });
    const [msg] = h.queue.take();
    const result = await h.deliver([msg!.body], {}, QUEUE_MAX_RETRIES);
    expect(result.explicitAcks).toHaveLength(1);
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
    expect(await eventsOf(id)).toEqual([]);
  });

  it("is at most the queue's max_retries in wrangler.toml, which QUEUE_MAX_RETRIES mirrors", () => {
    const block = wranglerToml
      .split("[[queues.consumers]]")
      .slice(1)
      .find((b) => /^\s*queue\s*=\s*"idemflow-steps"\s*$/m.test(b));
    const maxRetries = Number(/^\s*max_retries\s*=\s*(\d+)/m.exec(block ?? "")?.[1]);
    expect(QUEUE_MAX_RETRIES).toBe(maxRetries);
    expect(DROP_REDELIVERY_AT_ATTEMPT).toBeGreaterThan(1);
    expect(DROP_REDELIVERY_AT_ATTEMPT).toBeLessThanOrEqual(QUEUE_MAX_RETRIES);
  });
});

describe("dead letters", () => {
  async function deadLetter(h: Harness, messageId: string, executionId: string) {
    const batch = createMessageBatch<unknown>("idemflow-steps-dlq", [
      { id: messageId, timestamp: new Date(h.clock.now()), attempts: QUEUE_MAX_RETRIES + 1, body: { executionId, vertexId: "charge" } },
    ]);
    const ctx = createExecutionContext();
    await handleStepBatch(batch, env, ctx, h.rt);
    expect((await getQueueResult(batch, ctx)).ackAll).toBe(true);
    return env.DB.prepare("SELECT step_state, attempts FROM dead_letters WHERE message_id = ?1")
      .bind(messageId)
      .first<{ step_state: string | null; attempts: number }>();
  }

  it("for a COMPLETED step are kept, and recorded on the step as harmless — not as a failure", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 10 } });
    await h.drain();
    const messageId = unique("dlq-completed");
    expect(await deadLetter(h, messageId, id)).toEqual({ step_state: "COMPLETED", attempts: QUEUE_MAX_RETRIES + 1 });
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(["redelivery_dropped"]);
    expect(events[0]!.detail).toContain(
      `message ${messageId} reached idemflow-steps-dlq after ${QUEUE_MAX_RETRIES + 1} attempts; harmless: the step is already COMPLETED`,
    );
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("for a step EXECUTING under a live lease are recorded as harmless, naming the lease", async () => {
    const h = harness({ leaseMs: 30_000 });
    const { id } = await heldByAnotherWorker(h, 30_000);
    h.clock.advance(1_000);
    const messageId = unique("dlq-live");
    expect((await deadLetter(h, messageId, id))?.step_state).toBe("EXECUTING");
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(["redelivery_dropped"]);
    expect(events[0]!.detail).toMatch(/harmless: the step is EXECUTING under a live lease \(epoch 1,/);
  });

  it("for a step that still needs a run (lease expired) are recorded as dead_lettered, and the reaper heals the step", async () => {
    const h = harness({ leaseMs: 5_000 });
    const { id } = await heldByAnotherWorker(h, 5_000);
    h.clock.advance(6_000);
    await deadLetter(h, unique("dlq-expired"), id);
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(["dead_lettered"]);
    expect(events[0]!.detail).toContain("the step still needs a run: the reaper re-sends it");
    await reap(h.rt);
    expect(resent(h, id)).toBe(1);
    await h.drain();
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
  });
});
