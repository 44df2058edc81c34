import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { claimAndLoad, extendLease, settleAndDispatch } from "../../src/ledger";
import { readTrace, type Trace } from "../../src/steps/trace";
import { countingD1 } from "../helpers/counting-d1";
import { chargeWorkflow, crashOnce, executionStatus, harness, seedWorkflow, stepsOf, unique, type StepView as StepRow } from "./helpers";

afterEach(() => vi.restoreAllMocks());

const WS = "steps-claims";

describe("a step's happy path", () => {
  it("runs entry → Gateway → TRANSFORM to COMPLETED, sending the business-derived key", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "A-1001", total: 42 } });
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("COMPLETED");
    expect(steps.charge!.idempotency_key).toMatch(/^charge-[A-Za-z0-9_-]{43}$/);
    expect(steps.done!.state).toBe("COMPLETED");
    expect(JSON.parse(steps.done!.output!)).toEqual({ charged: "ch_1" });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1);
    expect(h.dest.keysSent("/payments/charges")).toEqual([steps.charge!.idempotency_key]);
    // The secret was resolved for the destination only.
    expect(h.dest.requests[0]!.headers.authorization).toBe(`Bearer ${env.PAYMENTS_KEY}`);
  });
});

describe("claims", () => {
  it("cost one round trip (claim + context), and settle-and-dispatch one batch", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "B-1", total: 1 } });
    const [first] = h.queue.take();
    // The TRANSFORM step: no key to persist, so the whole step is claim + settle.
    counting.reset();
    await h.deliver([first!.body]); // charge: claim batch, persist key (+ its first send), settle batch
    const chargeCalls = counting.calls.map((c) => c.kind);
    expect(chargeCalls).toEqual(["batch", "batch", "batch"]);
    // The key and the key's first send (the attempt's row, written at its end, reads the key from the step: migrations/0040).
    expect(counting.calls[1]!.sql).toHaveLength(2);
    const [next] = h.queue.take();
    counting.reset();
    await h.deliver([next!.body]); // done (TRANSFORM)
    expect(counting.roundTrips()).toBe(2);
    expect(counting.calls[0]!.sql.filter((s) => s.trimStart().startsWith("UPDATE steps"))).toHaveLength(1); // the claim is ONE statement
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("a Gateway step's later attempt costs two round trips: its key was persisted by the first", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "B-2", total: 1 } });
    h.dest.fault("/payments/charges", 503, 1);
    const [first] = h.queue.take();
    await h.deliver([first!.body]); // attempt 1: claim batch, persist key, fenced retry
    const [retry] = h.queue.take();
    h.clock.t = retry!.dueAt;
    counting.reset();
    await h.deliver([retry!.body]); // attempt 2: claim batch, settle batch — no key write
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch"]);
    const steps = await stepsOf(id);
    expect(steps.charge).toMatchObject({ state: "COMPLETED", attempt: 2 });
    expect(new Set(h.dest.keysSent("/payments/charges")).size).toBe(1);
  });

  it("a duplicate delivery of a completed step is acked after one round trip and runs nothing", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "C-1", total: 1 } });
    await h.drain();
    counting.reset();
    const result = await h.deliver([{ executionId: id, vertexId: "charge" }]);
    expect(counting.roundTrips()).toBe(1);
    expect(result.explicitAcks).toHaveLength(1);
    expect(h.dest.requests).toHaveLength(1);
  });

  it("two consumers racing for one step: exactly one runs the vertex", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "D-1", total: 5 } });
    const [msg] = h.queue.take();
    // Ten deliveries of the same message, concurrently, as ten consumers would get them.
    const results = await Promise.all(Array.from({ length: 10 }, () => h.deliver([msg!.body])));
    expect(h.dest.requests).toHaveLength(1);
    const acked = results.filter((r) => r.explicitAcks.length === 1).length;
    const retried = results.filter((r) => r.retryMessages.length === 1).length;
    expect(acked + retried).toBe(10);
    const steps = await stepsOf(id);
    expect(steps.charge!.epoch).toBe(1);
    expect(steps.charge!.attempt).toBe(1);
  });

  it("a claim while another worker's lease is live is retried no sooner than the lease ends", async () => {
    const h = harness({ leaseMs: 45_000 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "E-1", total: 5 } });
    const claim = await claimAndLoad(env.DB, { executionId: id, vertexId: "charge" }, h.clock.now(), 45_000);
    expect(claim.claimed?.epoch).toBe(1);
    h.clock.advance(10_000);
    const result = await h.deliver([{ executionId: id, vertexId: "charge" }]);
    expect(result.retryDelays[0]).toBeGreaterThanOrEqual(35);
    expect(h.dest.requests).toHaveLength(0);
  });

  it(
    "a worker whose lease was taken over finishes late: its completion is fenced out and recorded; the result is the new " + "owner's",
    async () => {
      const h = harness({ leaseMs: 1_000 });
      const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
      const id = await h.start(wf, { order: { id: "F-1", total: 5 } });
      const ref = { executionId: id, vertexId: "charge" };
      // Worker 1 claims, then stalls past its lease.
      const stale = await claimAndLoad(env.DB, ref, h.clock.now(), 1_000);
      h.clock.advance(5_000);
      // Worker 2 takes over and completes the step.
      await h.deliver([ref]);
      expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
      // Worker 1 wakes up and tries to settle its own result.
      const late = await settleAndDispatch(env.DB, {
        fence: { ...ref, epoch: stale.claimed!.epoch },
        now: h.clock.now(),
        outcome: { state: "COMPLETED", output: JSON.stringify({ status: 201, body: "zombie" }), nextVertices: ["done"] },
        request: null,
        backfill: [],
        descendants: [],
      });
      expect(late.settled).toBe(false);
      const steps = await stepsOf(id);
      expect(steps.charge!.epoch).toBe(2);
      expect(JSON.parse(steps.charge!.output!).body).not.toBe("zombie");
      const events = await env.DB.prepare(
        "SELECT type, epoch FROM step_events WHERE execution_id = ?1 AND vertex_id = 'charge' ORDER BY id",
      )
        .bind(id)
        .all<{ type: string; epoch: number }>();
      expect(events.results).toEqual([
        { type: "lease_expired", epoch: 1 },
        { type: "fenced_out", epoch: 1 },
      ]);
    },
  );

  it("a stale settle mid-EXECUTING is fenced out and recorded; the new owner keeps its epoch and lease, then settles", async () => {
    const h = harness({ leaseMs: 1_000 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("S"), total: 5 } });
    const ref = { executionId: id, vertexId: "charge" };
    const [msg] = h.queue.take();
    // Worker 1 claims and hangs in the destination call, past its lease.
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const stale = h.deliver([msg!.body]);
    while (h.dest.requests.length < 1) await new Promise((r) => setTimeout(r, 5));
    h.dest.hold = null;
    h.clock.advance(5_000);
    const takenOverAt = h.clock.now();
    // Worker 2 takes the step over. After its own call and BEFORE its settle, worker 1 wakes up and settles.
    let whileNewOwnerRuns: { step: StepRow; trace: Trace | null; staleAcks: number } | undefined;
    const owner = await h.deliver([ref], {
      afterRun: async () => {
        release();
        const staleResult = await stale;
        const step = (await env.DB.prepare("SELECT * FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
          .bind(id)
          .first<StepRow>())!;
        whileNewOwnerRuns = { step, trace: await readTrace(env.DB, WS, id), staleAcks: staleResult.explicitAcks.length };
      },
    });
    expect(whileNewOwnerRuns).toBeDefined();
    const { step, trace, staleAcks } = whileNewOwnerRuns!;
    expect(staleAcks).toBe(1); // the stale worker's message is done with: acked, not retried
    expect(step).toMatchObject({
      state: "EXECUTING",
      epoch: 2,
      attempt: 2,
      lease_until: takenOverAt + 1_000,
      output: null,
      finished_at: null,
    });
    const events = trace!.steps.find((s) => s.vertexId === "charge")!.events;
    expect(events.map((e) => [e.type, e.epoch])).toEqual([
      ["lease_expired", 1],
      ["fenced_out", 1],
    ]);
    expect(events[1]!.detail).toMatch(/late completed rejected/);
    // The new owner's settle then goes through, and the execution runs on.
    expect(owner.explicitAcks).toHaveLength(1);
    const settled = await stepsOf(id);
    expect(settled.charge).toMatchObject({ state: "COMPLETED", epoch: 2 });
    expect(settled.done!.state).toBe("DISPATCHED");
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1); // both calls carried the one key: charged once
  });

  it("the heartbeat extends a live lease and is fenced: a stale epoch cannot extend it", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "G-1", total: 5 } });
    const ref = { executionId: id, vertexId: "charge" };
    const first = await claimAndLoad(env.DB, ref, h.clock.now(), 1_000);
    expect(await extendLease(env.DB, { ...ref, epoch: first.claimed!.epoch }, h.clock.now() + 500, 1_000)).toBe(true);
    h.clock.advance(5_000);
    const second = await claimAndLoad(env.DB, ref, h.clock.now(), 1_000);
    expect(second.claimed!.epoch).toBe(2);
    expect(await extendLease(env.DB, { ...ref, epoch: first.claimed!.epoch }, h.clock.now(), 60_000)).toBe(false);
  });

  it("crash after the destination call, before settle: the re-run after lease expiry sends the SAME key; it charges once", async () => {
    const h = harness({ leaseMs: 2_000, afterRun: crashOnce() });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "H-1", total: 99 } });
    const [msg] = h.queue.take();
    const crashed = await h.deliver([msg!.body]);
    expect(crashed.retryDelays[0]).toBeGreaterThanOrEqual(2);
    expect((await stepsOf(id)).charge!.state).toBe("EXECUTING");
    h.clock.advance(2_000);
    await h.deliver([msg!.body]);
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("COMPLETED");
    expect(steps.charge!.attempt).toBe(2);
    const keys = h.dest.keysSent("/payments/charges");
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(keys[1]);
    expect(h.dest.effects).toHaveLength(1); // the ledger replayed the second call
    expect(JSON.parse(steps.charge!.output!).headers["idempotent-replayed"]).toBe("true");
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("poison messages (malformed bodies) are acked, never retried", async () => {
    const h = harness();
    const result = await h.deliver([{ nope: true }, "garbage"]);
    expect(result.explicitAcks).toHaveLength(2);
    expect(result.retryMessages).toHaveLength(0);
  });

  it("an execution its shard does not have is retried with an alert, never acked (a wrong shard must not drop a step)", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: unknown) => void lines.push(String(line)));
    const h = harness();
    const result = await h.deliver([{ executionId: "does-not-exist", vertexId: "x" }]);
    expect(result.explicitAcks).toHaveLength(0);
    expect(result.retryMessages.map((m) => m.msgId)).toEqual(["msg-1"]);
    expect(result.retryDelays).toEqual([60]);
    expect(lines.map((l) => JSON.parse(l) as { event: string })).toContainEqual(
      expect.objectContaining({ event: "queue.execution_missing", executionId: "does-not-exist", shard: 0 }),
    );
  });

  it("an execution removed by history (its tombstone kept) is acked: the message is harmless", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const h = harness();
    await h.rt.db
      .prepare(
        `INSERT INTO execution_tombstones
           (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at)
         VALUES ('swept-one', 'steps-claims', 'wf', 'COMPLETED', 1, 2, 3, 'retention', 0, 9999999999999)`,
      )
      .run();
    const result = await h.deliver([{ executionId: "swept-one", vertexId: "x" }]);
    expect(result.explicitAcks).toEqual(["msg-1"]);
    expect(result.retryMessages).toHaveLength(0);
  });
});
