/**
 * DELAY (SPEC section 14, docs/waits.md): a step that sleeps holding nothing — parked, EXECUTING
 * with its lease and `parked_until` at its wake time — and resumes once, by the claim after that
 * time, however often its wake-up arrives. Real D1, the real consumer, the harness's clock and queue.
 */
import { createExecutionContext, env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { validateDefinition } from "../../src/definitions/validate";
import { reap } from "../../src/steps/reaper";
import { WAKE_GRACE_MS, wakeTask } from "../../src/steps/cron";
import { countingD1 } from "../helpers/counting-d1";
import { callApp, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const WS = "steps-delay";

/** entry → nap (DELAY with `config`) → done (a transform reading the nap's output). */
function napping(config: Record<string, unknown>): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      { id: "nap", type: "DELAY", config },
      { id: "done", type: "TRANSFORM", config: { output: { woke: "= steps.nap.wokeAt" } } },
    ],
    edges: [
      { from: "entry", to: "nap" },
      { from: "nap", to: "done" },
    ],
  } as WorkflowDefinitionInput;
}

async function stepRow(executionId: string, vertexId: string) {
  return env.DB.prepare("SELECT state, epoch, parked_until, wake_at, lease_until FROM steps WHERE execution_id = ?1 AND vertex_id = ?2")
    .bind(executionId, vertexId)
    .first<{ state: string; epoch: number; parked_until: number | null; wake_at: number | null; lease_until: number | null }>();
}

async function attemptsOf(executionId: string, vertexId: string): Promise<string[]> {
  const { results } = await env.DB.prepare("SELECT outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY epoch")
    .bind(executionId, vertexId)
    .all<{ outcome: string }>();
  return results.map((r) => r.outcome);
}

async function eventsOf(executionId: string): Promise<string[]> {
  const { results } = await env.DB.prepare("SELECT type FROM step_events WHERE execution_id = ?1 ORDER BY id")
    .bind(executionId)
    .all<{ type: string }>();
  return results.map((r) => r.type);
}

/** Starts `wf` and delivers the DELAY's first message: the step parks. */
async function parked(h: Harness, config: Record<string, unknown>) {
  const wf = await seedWorkflow(WS, napping(config));
  const id = await h.start(wf, { at: new Date(h.clock.now() + 5 * HOUR).toISOString() });
  const [first] = h.queue.take();
  const delivery = await h.deliver([first!.body]);
  return { id, first: first!, delivery };
}

describe("saving a DELAY", () => {
  const errors = (config: Record<string, unknown>) => {
    const result = validateDefinition(napping(config));
    return result.ok ? [] : result.errors.map((e) => [e.pointer, e.code]);
  };

  it("takes `for` up to 365 days or an `until` expression — exactly one of them", () => {
    expect(errors({ for: "365d" })).toEqual([]);
    expect(errors({ for: "90s" })).toEqual([]);
    expect(errors({ until: "= payload.at" })).toEqual([]);
    expect(errors({ for: "366d" })).toEqual([["/vertices/1/config/for", "duration-too-long"]]);
    expect(errors({})).toEqual([["/vertices/1/config", "delay-for-or-until"]]);
    expect(errors({ for: "1h", until: "= payload.at" })).toEqual([["/vertices/1/config", "delay-for-or-until"]]);
    // `until` is an expression (a literal time is written `= '2026-12-24T09:00:00Z'`).
    expect(errors({ until: "2026-12-24T09:00:00Z" })).not.toEqual([]);
    expect(errors({ until: "= '2026-12-24T09:00:00Z'" })).toEqual([]);
  });
});

describe("a DELAY sleeps parked and resumes once", () => {
  it("parks with nothing held, acks early messages silently, and resumes after its time through its delayed message", async () => {
    const h = harness();
    const start = h.clock.now();
    const { id, delivery } = await parked(h, { for: "2h" });
    expect(delivery.explicitAcks).toHaveLength(1);
    // Parked: EXECUTING, leased and parked until its wake time; the claim's attempt ended `slept`.
    expect(await stepRow(id, "nap")).toMatchObject({
      state: "EXECUTING",
      epoch: 1,
      parked_until: start + 2 * HOUR,
      wake_at: start + 2 * HOUR,
    });
    expect(await attemptsOf(id, "nap")).toEqual(["slept"]);
    // Its wake-up is a delayed message, due at the wake time.
    expect(h.queue.pending).toEqual([{ body: expect.objectContaining({ executionId: id, vertexId: "nap" }), dueAt: start + 2 * HOUR }]);

    // A duplicate of the first message, five times over: acked at once, never bounced, nothing recorded.
    for (let i = 1; i <= 5; i++) {
      const early = await h.deliver([{ executionId: id, vertexId: "nap" }], {}, i);
      expect(early.retryMessages).toEqual([]);
      expect(early.explicitAcks).toHaveLength(1);
    }
    expect(await eventsOf(id)).toEqual([]);
    // The reaper leaves a parked step alone, even past its wake time (its lease ends there too): a
    // sleeping step is not a crashed worker — its wake-up resumes it, with no lease_expired.
    h.clock.t = start + 2 * HOUR + 5 * 60_000;
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 0 });

    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(JSON.parse(steps.nap!.output!)).toEqual({
      wakeAt: new Date(start + 2 * HOUR).toISOString(),
      wokeAt: new Date(start + 2 * HOUR + 5 * 60_000).toISOString(),
    });
    expect(await attemptsOf(id, "nap")).toEqual(["slept", "completed"]);
    expect(await eventsOf(id)).not.toContain("lease_expired");
    // Sleeping is neither a retry nor a stopped redelivery: the counters saw none.
    expect(await env.DB.prepare("SELECT max_attempt, redeliveries_stopped FROM executions WHERE id = ?1").bind(id).first()).toEqual({
      max_attempt: 1,
      redeliveries_stopped: 0,
    });
    expect((await stepRow(id, "nap"))?.parked_until).toBeNull();
  });

  it("`for` counts from the step's dispatch, not from its claim: a first message delivered late wakes at dispatch + for", async () => {
    const h = harness();
    const dispatchedAt = h.clock.now();
    const wf = await seedWorkflow(WS, napping({ for: "2h" }));
    const id = await h.start(wf, {});
    const [first] = h.queue.take();
    // The queue is slow: the first claim comes 90 minutes after the dispatch.
    h.clock.advance(90 * 60_000);
    await h.deliver([first!.body]);
    expect(await stepRow(id, "nap")).toMatchObject({
      state: "EXECUTING",
      wake_at: dispatchedAt + 2 * HOUR,
      parked_until: dispatchedAt + 2 * HOUR,
    });
    expect(h.queue.pending).toEqual([
      { body: expect.objectContaining({ executionId: id, vertexId: "nap" }), dueAt: dispatchedAt + 2 * HOUR },
    ]);
    // A claim later than the whole sleep completes at once, woken at dispatch + for.
    const late = await seedWorkflow(WS, napping({ for: "30m" }));
    const lateDispatch = h.clock.now();
    const lateId = await h.start(late, {});
    const [lateFirst] = h.queue.take().filter((m) => (m.body as { executionId: string }).executionId === lateId);
    h.clock.advance(HOUR);
    await h.deliver([lateFirst!.body]);
    expect(JSON.parse((await stepsOf(lateId)).nap!.output!)).toEqual({
      wakeAt: new Date(lateDispatch + 30 * 60_000).toISOString(),
      wokeAt: new Date(lateDispatch + HOUR).toISOString(),
    });
  });

  it("a wake-up delivered twice at once (message and cron, or a redelivery) resumes it once", async () => {
    const h = harness();
    const { id } = await parked(h, { for: "30m" });
    const [wake] = h.queue.take();
    h.clock.t = wake!.dueAt;
    const results = await Promise.all([h.deliver([wake!.body]), h.deliver([wake!.body]), h.deliver([wake!.body])]);
    expect(results.every((r) => r.explicitAcks.length + r.retryMessages.length === 1)).toBe(true);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await attemptsOf(id, "nap")).toEqual(["slept", "completed"]);
    expect((await stepsOf(id)).done?.state).toBe("COMPLETED");
  });

  it("a sleep past the queue's 12-hour delay sends no message; the cron's wake-up task wakes it after its time", async () => {
    const h = harness();
    const start = h.clock.now();
    const { id } = await parked(h, { for: "3d" });
    expect(h.queue.pending).toEqual([]);
    const shardEnv = { ...env, QUEUE: h.queue } as unknown as Env;
    const wokenAt = async (scheduledTime: number) => {
      await wakeTask.run(shardEnv, { cron: "* * * * *", scheduledTime }, createExecutionContext());
      return h.queue.take().filter((m) => m.body.executionId === id).length;
    };
    // At its time, and within the grace after it (its own message would come): not woken by cron.
    expect(await wokenAt(start + 3 * DAY)).toBe(0);
    const late = start + 3 * DAY + WAKE_GRACE_MS;
    expect(await wokenAt(late)).toBe(1);
    h.clock.t = late;
    await h.deliver([{ executionId: id, vertexId: "nap" }]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await wokenAt(late + HOUR)).toBe(0);
  });

  it("`until` is evaluated once: a time in the past resumes at once; past 365 days or not a time fails the step", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, napping({ until: "= payload.at" }));
    const past = await h.start(wf, { at: new Date(h.clock.now() - HOUR).toISOString() });
    const tooFar = await h.start(wf, { at: h.clock.now() + 366 * DAY });
    const notATime = await h.start(wf, { at: "soon" });
    const inFive = await h.start(wf, { at: new Date(h.clock.now() + 5 * HOUR).toISOString() });
    for (const m of h.queue.take()) await h.deliver([m.body]);
    expect(await executionStatus(past)).toBe("RUNNING"); // its successor's message is pending
    expect((await stepsOf(past)).nap?.state).toBe("COMPLETED");
    expect((await stepsOf(tooFar)).nap).toMatchObject({ state: "FAILED", error: expect.stringMatching(/more than 365 days ahead/) });
    expect((await stepsOf(notATime)).nap).toMatchObject({ state: "FAILED", error: expect.stringMatching(/not a time/) });
    expect(await stepRow(inFive, "nap")).toMatchObject({ parked_until: h.clock.now() + 5 * HOUR, wake_at: h.clock.now() + 5 * HOUR });
  });

  it("costs a parking claim two round trips (claim, park) and a wake-up two (claim, settle)", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, napping({ for: "10m" }));
    const id = await h.start(wf, {});
    const [first] = h.queue.take();
    counting.reset();
    await h.deliver([first!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch"]);
    const [wake] = h.queue.take();
    h.clock.t = wake!.dueAt;
    counting.reset();
    await h.deliver([wake!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch"]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("parks when chained too (the trigger's inline run, a settle's chained claim)", async () => {
    const h = harness({}, { chain: true });
    const wf = await seedWorkflow(WS, napping({ for: "5m" }));
    const id = await h.start(wf, {});
    expect(await stepRow(id, "nap")).toMatchObject({ state: "EXECUTING", parked_until: h.clock.now() + 5 * 60_000 });
    h.clock.advance(5 * 60_000);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect((await stepsOf(id)).done?.state).toBe("COMPLETED");
  });

  it("cancel of a sleeping execution: CANCELLED at once; its wake-up, when it comes, finds nothing to run", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", napping({ for: "1h" }));
    const id = await h.start(wf, {});
    await h.deliver([h.queue.take()[0]!.body]);
    expect((await stepRow(id, "nap"))?.state).toBe("EXECUTING");
    const res = await callApp(h, "POST", `/v1/executions/${id}/cancel`, { key: unique("cancel"), body: {} });
    expect(res.status).toBe(200);
    expect(await executionStatus(id)).toBe("CANCELLED");
    h.clock.advance(HOUR);
    await h.drain();
    expect((await stepRow(id, "nap"))?.state).toBe("CANCELLED");
    expect((await stepsOf(id)).done).toBeUndefined();
  });
});
