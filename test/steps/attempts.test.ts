/**
 * Every attempt of a step on record (SPEC section 4, docs/steps.md "Every attempt on record"):
 * the trace's `attempts[]` — one per claim, with the key sent, the redacted request, the answer,
 * the error and the retry delay chosen and why — written inside the batches that already run,
 * fenced, bounded per step and in size.
 */
import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import {
  claimAndLoad,
  extendLease,
  MAX_ATTEMPT_ERROR_CHARS,
  MAX_ATTEMPT_SUMMARY_BYTES,
  MAX_ATTEMPTS_KEPT,
  persistIdempotencyKey,
  redispatchExpiredLeases,
  scheduleRetry,
  settleAndDispatch,
  type Fence,
} from "../../src/ledger";
import { boundedJson, truncateChars } from "../../src/ledger/attempts";
import { readTrace } from "../../src/steps/trace";
import { countingD1 } from "../helpers/counting-d1";
import { chargeWorkflow, crashOnce, DEST, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-attempts";

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => {});
  vi.spyOn(console, "error").mockImplementation(() => {});
});

async function attemptsOf(executionId: string, vertexId = "charge") {
  const trace = await readTrace(env.DB, WS, executionId);
  return trace!.steps.find((s) => s.vertexId === vertexId)!.attempts;
}

/** The rows as stored (the trace may show an open attempt of a step that moved on as lost before the next claim says so). */
async function storedAttempts(executionId: string, vertexId = "charge") {
  const { results } = await env.DB.prepare(
    "SELECT epoch, outcome, finished_at FROM step_attempts WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY epoch",
  )
    .bind(executionId, vertexId)
    .all<{ epoch: number; outcome: string; finished_at: number | null }>();
  return results;
}

/** The charge's attempt settled COMPLETED under `fence`, answered 201 with `body`, the next step `done` (its settle batch). */
function settleCharge(fence: Fence, now: number, body: string, request: string | null = null) {
  return settleAndDispatch(env.DB, {
    fence,
    now,
    outcome: { state: "COMPLETED", output: JSON.stringify({ status: 201, body }), nextVertices: ["done"] },
    request,
    response: { status: 201, headers: {}, body },
    backfill: [],
    descendants: [],
  });
}

describe("every attempt on record", () => {
  it("a step retried after two 500s shows three attempts with the same key, each with its answer and delay", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    h.dest.fault("/payments/charges", 500, 2);
    const id = await h.start(wf, { order: { id: unique("A"), total: 42 } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    const attempts = await attemptsOf(id);
    expect(attempts).toHaveLength(3);
    expect(attempts.map((a) => [a.epoch, a.attempt, a.outcome, a.response?.status])).toEqual([
      [1, 1, "retried", 500],
      [2, 2, "retried", 500],
      [3, 3, "completed", 201],
    ]);
    expect(new Set(attempts.map((a) => a.idempotencyKey))).toEqual(new Set([steps.charge!.idempotency_key]));
    expect(h.dest.keysSent("/payments/charges")).toEqual(attempts.map((a) => a.idempotencyKey));
    // Backoff (exponential, full jitter at 0.5 in the harness): 500 ms, then 1000 ms.
    expect(attempts.map((a) => a.retryDelay)).toEqual([
      { ms: 500, reason: "backoff", until: new Date(Date.parse(attempts[0]!.finishedAt!) + 500).toISOString() },
      { ms: 1000, reason: "backoff", until: new Date(Date.parse(attempts[1]!.finishedAt!) + 1000).toISOString() },
      null,
    ]);
    expect(attempts[0]!.error).toBe("attempt 1: POST localhost:8788/payments/charges answered 500");
    expect(attempts[2]!.error).toBeNull();
    for (const a of attempts) {
      expect(a.startedAt).not.toBeNull();
      expect(a.finishedAt).not.toBeNull();
      expect(a.durationMs).toBe(Date.parse(a.finishedAt!) - Date.parse(a.startedAt!));
      // The redacted request summary: the secret header shows as [redacted].
      expect(a.request).toMatchObject({ method: "POST", url: `${DEST}/payments/charges`, headers: { Authorization: "Bearer [redacted]" } });
    }
    // The answer: status, allowlisted headers, body.
    expect(attempts[0]!.response).toEqual({ status: 500, headers: { "content-type": "application/json" }, body: { error: "scripted" } });
    expect(attempts[2]!.response).toMatchObject({ status: 201, body: { id: "ch_1" }, headers: { "content-type": "application/json" } });
    // The TRANSFORM after it has one attempt: no key, no request, no answer.
    expect(await attemptsOf(id, "done")).toMatchObject([
      { epoch: 1, outcome: "completed", idempotencyKey: null, request: null, response: null, retryDelay: null },
    ]);
  });

  /** The attempts of a charge whose first call answers `status` with `headers`, run to the end. */
  async function afterOneFault(status: number, headers: Record<string, string>) {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    h.dest.fault("/payments/charges", status, 1, { headers });
    const id = await h.start(wf, { order: { id: unique("O"), total: 1 } });
    await h.drain();
    return attemptsOf(id);
  }

  it("a Retry-After that set the delay is recorded with reason retry-after", async () => {
    const attempts = await afterOneFault(503, { "retry-after": "7" });
    expect(attempts.map((a) => a.outcome)).toEqual(["retried", "completed"]);
    expect(attempts[0]!.retryDelay).toMatchObject({ ms: 7000, reason: "retry-after" });
    expect(attempts[0]!.response).toMatchObject({ status: 503, headers: { "retry-after": "7" } });
  });

  it("an in-progress 409 is recorded as in_progress with reason in-progress, and the next attempt sends the same key", async () => {
    const attempts = await afterOneFault(409, { "retry-after": "3" });
    expect(attempts.map((a) => [a.epoch, a.outcome, a.response?.status])).toEqual([
      [1, "in_progress", 409],
      [2, "completed", 201],
    ]);
    expect(attempts[0]!.retryDelay).toMatchObject({ ms: 3000, reason: "in-progress" });
    expect(attempts[0]!.error).toMatch(/^waiting: destination says in progress \(attempt 1\)/);
    expect(attempts[0]!.idempotencyKey).toBe(attempts[1]!.idempotencyKey);
  });

  it("a crashed attempt shows as lost (started, never finished) beside the takeover's attempt, epoch 2, same key", async () => {
    const h = harness({ leaseMs: 2_000, afterRun: crashOnce() });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("C"), total: 9 } });
    const [msg] = h.queue.take();
    await h.deliver([msg!.body]);
    // While the step still runs under the crashed worker's lease, its attempt is running: shown
    // from the step row, no row written (migrations/0040).
    expect((await attemptsOf(id)).map((a) => a.outcome)).toEqual(["running"]);
    expect(await storedAttempts(id)).toEqual([]);
    h.clock.advance(2_000);
    // The reaper re-dispatches the expired lease and records the attempt lost in the same statement.
    await redispatchExpiredLeases(env.DB, h.clock.now(), 100);
    expect(await storedAttempts(id)).toEqual([{ epoch: 1, outcome: "lost", finished_at: null }]);
    expect((await attemptsOf(id)).map((a) => a.outcome)).toEqual(["lost"]);
    await h.deliver([msg!.body]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect((await storedAttempts(id)).map((a) => a.outcome)).toEqual(["lost", "completed"]);
    const [lost, taken] = await attemptsOf(id);
    expect(lost).toMatchObject({ epoch: 1, outcome: "lost", finishedAt: null, durationMs: null, response: null, error: null });
    expect(lost!.startedAt).not.toBeNull();
    expect(taken).toMatchObject({ epoch: 2, attempt: 2, outcome: "completed", response: { status: 201 } });
    // Both sent the one key (the lost attempt's was recorded when it persisted it): the destination replayed.
    expect(lost!.idempotencyKey).not.toBeNull();
    expect(lost!.idempotencyKey).toBe(taken!.idempotencyKey);
    expect(taken!.response!.headers).toMatchObject({ "idempotent-replayed": "true" });
    expect(h.dest.effects).toHaveLength(1);
  });

  it("a fenced-out stale settle or retry changes neither the newer attempt nor its own lost record", async () => {
    const h = harness({ leaseMs: 1_000 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("F"), total: 5 } });
    const ref = { executionId: id, vertexId: "charge" };
    const stale = await claimAndLoad(env.DB, ref, h.clock.now(), 1_000);
    h.clock.advance(5_000);
    const owner = await claimAndLoad(env.DB, ref, h.clock.now(), 60_000);
    expect(owner.claimed!.epoch).toBe(2);
    const before = await env.DB.prepare("SELECT * FROM step_attempts WHERE execution_id = ?1 ORDER BY epoch").bind(id).all();
    // The takeover recorded the stale attempt lost; the owner's runs with no row until it ends (migrations/0040).
    expect(before.results.map((r) => r.outcome)).toEqual(["lost"]);
    expect((await attemptsOf(id)).map((a) => a.outcome)).toEqual(["lost", "running"]);
    h.clock.advance(100);
    const staleFence = { ...ref, epoch: stale.claimed!.epoch };
    const late = await settleCharge(staleFence, h.clock.now(), "zombie", JSON.stringify({ method: "POST", url: "zombie" }));
    expect(late.settled).toBe(false);
    const retried = await scheduleRetry(env.DB, staleFence, {
      now: h.clock.now(),
      availableAt: h.clock.now() + 1_000,
      delayReason: "backoff",
      error: "zombie",
      request: null,
      output: null,
    });
    expect(retried).toBe(false);
    const after = await env.DB.prepare("SELECT * FROM step_attempts WHERE execution_id = ?1 ORDER BY epoch").bind(id).all();
    expect(after.results).toEqual(before.results);
    // The owner then settles its own attempt.
    await settleCharge({ ...ref, epoch: 2 }, h.clock.now(), "real");
    const [lost, done] = await attemptsOf(id);
    expect(lost).toMatchObject({ epoch: 1, outcome: "lost", finishedAt: null, response: null });
    expect(done).toMatchObject({ epoch: 2, outcome: "completed", response: { status: 201, body: "real" }, durationMs: 100 });
  });

  it("a claim writes no attempt row: the running attempt is read from the step, started at its claim; its end writes it once", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("R"), total: 3 } });
    const ref = { executionId: id, vertexId: "charge" };
    const claimedAt = h.clock.now();
    const claim = await claimAndLoad(env.DB, ref, claimedAt, 60_000);
    expect(claim.claimed!.epoch).toBe(1);
    expect(await storedAttempts(id)).toEqual([]);
    expect(await attemptsOf(id)).toMatchObject([
      { epoch: 1, attempt: 1, outcome: "running", startedAt: new Date(claimedAt).toISOString(), finishedAt: null, idempotencyKey: null },
    ]);
    // The key persisted and the lease extended move the step's updated_at, not the attempt's start.
    h.clock.advance(300);
    const fence = { ...ref, epoch: 1 };
    const persisted = await persistIdempotencyKey(env.DB, fence, unique("key"), h.clock.now(), DEST, false);
    expect(persisted).not.toBeNull();
    expect(await extendLease(env.DB, fence, h.clock.now(), 60_000)).toBe(true);
    expect(await attemptsOf(id)).toMatchObject([
      { epoch: 1, outcome: "running", startedAt: new Date(claimedAt).toISOString(), idempotencyKey: persisted!.key },
    ]);
    expect(await storedAttempts(id)).toEqual([]);
    h.clock.advance(200);
    const settled = await settleCharge(fence, h.clock.now(), "ok");
    expect(settled.settled).toBe(true);
    expect(await storedAttempts(id)).toEqual([{ epoch: 1, outcome: "completed", finished_at: claimedAt + 500 }]);
    expect(await attemptsOf(id)).toMatchObject([
      { epoch: 1, outcome: "completed", startedAt: new Date(claimedAt).toISOString(), durationMs: 500, idempotencyKey: persisted!.key },
    ]);
  });

  it("a running row from before migrations/0040: closed at its end, or lost at the reaper's, with its start and key", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const legacy = async (total: number) => {
      const id = await h.start(wf, { order: { id: unique("L"), total } });
      const ref = { executionId: id, vertexId: "charge" };
      const openedAt = h.clock.now();
      expect((await claimAndLoad(env.DB, ref, openedAt, 1_000)).claimed!.epoch).toBe(1);
      // The row the claim opened before migrations/0040 (`openAttempt`), with the key the persist recorded then.
      await env.DB.prepare(
        `INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, idempotency_key, seq, ev_mark)
         VALUES (?1, 'charge', 1, 1, 'running', ?2, 'legacy-key', 1, 0)`,
      )
        .bind(id, openedAt - 50)
        .run();
      return { id, ref, openedAt };
    };
    const ended = await legacy(1);
    h.clock.advance(100);
    await settleAndDispatch(env.DB, {
      fence: { ...ended.ref, epoch: 1 },
      now: h.clock.now(),
      outcome: { state: "COMPLETED", output: "{}", nextVertices: ["done"] },
      request: null,
      backfill: [],
      descendants: [],
    });
    expect(await attemptsOf(ended.id)).toMatchObject([
      {
        epoch: 1,
        outcome: "completed",
        startedAt: new Date(ended.openedAt - 50).toISOString(),
        durationMs: 150,
        idempotencyKey: "legacy-key",
      },
    ]);
    const reaped = await legacy(2);
    h.clock.advance(2_000);
    await redispatchExpiredLeases(env.DB, h.clock.now(), 100);
    expect(await attemptsOf(reaped.id)).toMatchObject([
      {
        epoch: 1,
        outcome: "lost",
        startedAt: new Date(reaped.openedAt - 50).toISOString(),
        finishedAt: null,
        idempotencyKey: "legacy-key",
      },
    ]);
    const rows = await env.DB.prepare("SELECT seq FROM step_attempts WHERE execution_id = ?1").bind(reaped.id).all<{ seq: number }>();
    expect(rows.results.map((r) => r.seq)).toEqual([2]);
  });

  it(`keeps the newest ${MAX_ATTEMPTS_KEPT} attempts of a step; the counters keep counting`, async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("N"), total: 1 } });
    const ref = { executionId: id, vertexId: "charge" };
    const claims = MAX_ATTEMPTS_KEPT + 5;
    for (let i = 0; i < claims; i++) {
      // Each claim takes the step over from the previous one, whose lease expired.
      expect((await claimAndLoad(env.DB, ref, h.clock.now(), 1_000)).claimed!.epoch).toBe(i + 1);
      h.clock.advance(1_000);
    }
    // The running attempt has no row until it ends (migrations/0040): the trim keeps room for it.
    const stored = await storedAttempts(id);
    expect(stored).toHaveLength(MAX_ATTEMPTS_KEPT - 1);
    expect(stored.map((a) => a.epoch)).toEqual(Array.from({ length: MAX_ATTEMPTS_KEPT - 1 }, (_, i) => claims - MAX_ATTEMPTS_KEPT + 1 + i));
    expect(stored.every((a) => a.outcome === "lost")).toBe(true);
    expect((await stepsOf(id)).charge!.attempt).toBe(claims);
    const shown = await attemptsOf(id);
    expect(shown).toHaveLength(MAX_ATTEMPTS_KEPT);
    expect(shown.at(-1)).toMatchObject({ epoch: claims, outcome: "running" });
    // Its end writes the 20th row.
    await settleCharge({ ...ref, epoch: claims }, h.clock.now(), "ok");
    const ended = await storedAttempts(id);
    expect(ended).toHaveLength(MAX_ATTEMPTS_KEPT);
    expect(ended.at(-1)).toMatchObject({ epoch: claims, outcome: "completed" });
  });

  it("bounds what it stores: a large answer is kept as a preview within 8 KiB, a long error at 2,000 characters", async () => {
    const h = harness({
      fetch: async (input, init) => {
        const url = new URL(new Request(input as RequestInfo, init).url);
        if (url.pathname === "/payments/charges") throw new Error(`connection reset ${"x".repeat(5_000)}`);
        return new Response("y".repeat(50_000), { status: 200, headers: { "content-type": "text/plain" } });
      },
    });
    const wf = await seedWorkflow(WS, {
      ...chargeWorkflow(unique("wf"), { retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 10, maxDelayMs: 10 } }),
    });
    const big = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "big", type: "GATEWAY", config: { method: "POST", url: `${DEST}/big`, maxResponseBytes: 100_000 } },
      ],
      edges: [{ from: "received", to: "big" }],
    });
    const failing = await h.start(wf, { order: { id: unique("E"), total: 1 } });
    const answering = await h.start(big, { n: 1 });
    await h.drain();
    const [failed] = await attemptsOf(failing);
    expect(failed!.outcome).toBe("failed");
    expect(failed!.error!.length).toBe(MAX_ATTEMPT_ERROR_CHARS);
    expect(failed!.error).toMatch(
      /^gave up after 1 attempt\(s\): POST localhost:8788\/payments\/charges: network error: connection reset x+$/,
    );
    const [answered] = await attemptsOf(answering, "big");
    expect(answered!.outcome).toBe("completed");
    expect(answered!.response).toMatchObject({
      status: 200,
      headers: { "content-type": "text/plain" },
      body: { truncated: true, bytes: 50_000, preview: "y".repeat(4096) },
    });
    const row = await env.DB.prepare("SELECT length(CAST(response AS BLOB)) AS bytes FROM step_attempts WHERE execution_id = ?1")
      .bind(answering)
      .first<{ bytes: number }>();
    expect(row!.bytes).toBeLessThanOrEqual(MAX_ATTEMPT_SUMMARY_BYTES);
  });

  it("bounds summaries whatever they hold: escaping, multi-byte text, no body, a broken surrogate pair", () => {
    const within = (text: string) => expect(new TextEncoder().encode(text).byteLength).toBeLessThanOrEqual(MAX_ATTEMPT_SUMMARY_BYTES);
    const small = { status: 1, body: { a: 1 } };
    expect(boundedJson(small)).toBe(JSON.stringify(small));
    // Each control character escapes to six bytes of JSON: the preview shrinks until it fits.
    const escaped = JSON.parse(boundedJson({ headers: {}, body: "\u0001".repeat(20_000) })) as { body: { preview: string } };
    expect(escaped.body).toMatchObject({ truncated: true, bytes: 20_000 });
    expect(escaped.body.preview === "\u0001".repeat(1024)).toBe(true);
    // Multi-byte text is cut on a character boundary, within the preview's bytes.
    const wide = JSON.parse(boundedJson({ headers: {}, body: "€😀".repeat(10_000) })) as { body: { preview: string } };
    expect(wide.body.preview === "€😀".repeat(585)).toBe(true); // 4095 of the 4096 bytes: one more "€" would not fit
    for (const value of [
      { headers: { location: "z".repeat(20_000) }, body: "b" }, // the rest is too large: the whole summary is previewed
      ["\u0002".repeat(20_000)],
      "\u0003".repeat(20_000),
    ]) {
      const text = boundedJson(value);
      within(text);
      expect(JSON.parse(text)).toMatchObject({ truncated: true });
    }
    expect(truncateChars("ab😀", 3)).toBe("ab");
    expect(truncateChars("abc", 5)).toBe("abc");
  });
});

describe("the schema states the rules (migrations/0010)", () => {
  const insert = (row: Record<string, unknown>) => {
    const values = { execution_id: unique("x"), vertex_id: "v", epoch: 1, attempt: 1, outcome: "running", started_at: 1, ...row };
    const names = Object.keys(values);
    return env.DB.prepare(`INSERT INTO step_attempt_rows (${names.join(", ")}) VALUES (${names.map((_, i) => `?${i + 1}`).join(", ")})`)
      .bind(...Object.values(values))
      .run();
  };

  it("accepts the rows the ledger writes", async () => {
    await insert({});
    await insert({ outcome: "lost" });
    await insert({ outcome: "completed", finished_at: 2, response_status: 201, response: "{}" });
    await insert({ outcome: "retried", finished_at: 2, delay_ms: 500, delay_reason: "backoff", error: "e" });
    await insert({ outcome: "in_progress", finished_at: 2, delay_ms: 1000, delay_reason: "in-progress" });
  });

  for (const [name, row] of [
    ["a finished attempt without its end time", { outcome: "completed" }],
    ["a running attempt with an end time", { finished_at: 2 }],
    ["a lost attempt with an end time", { outcome: "lost", finished_at: 2 }],
    ["an end before the start", { outcome: "failed", started_at: 5, finished_at: 2 }],
    ["a retry without its delay", { outcome: "retried", finished_at: 2 }],
    ["a delay without its reason", { outcome: "retried", finished_at: 2, delay_ms: 5 }],
    ["a completed attempt with a delay", { outcome: "completed", finished_at: 2, delay_ms: 5, delay_reason: "backoff" }],
    [
      "an in-progress re-check waiting for another reason",
      { outcome: "in_progress", finished_at: 2, delay_ms: 5, delay_reason: "backoff" },
    ],
    ["a counted retry waiting for in-progress", { outcome: "retried", finished_at: 2, delay_ms: 5, delay_reason: "in-progress" }],
    ["an unknown outcome", { outcome: "maybe" }],
    ["a response without its status", { outcome: "completed", finished_at: 2, response: "{}" }],
    ["a request summary over 8 KiB", { request: "r".repeat(8193) }],
    ["an error over 2,000 characters", { error: "e".repeat(2001) }],
  ] as const) {
    it(`refuses ${name}`, async () => {
      await expect(insert(row)).rejects.toThrow(/CHECK constraint failed/);
    });
  }
});

describe("round trips", () => {
  it("are unchanged: a Gateway first attempt 3, a later one 2, a TRANSFORM 2, a duplicate 1, the trace 1", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    h.dest.fault("/payments/charges", 503, 1);
    const id = await h.start(wf, { order: { id: unique("B"), total: 1 } });
    const [first] = h.queue.take();
    counting.reset();
    await h.deliver([first!.body]); // claim, persist key, retry (+ the attempt written, at its end)
    expect(counting.roundTrips()).toBe(3);
    const [retry] = h.queue.take();
    h.clock.t = retry!.dueAt;
    counting.reset();
    await h.deliver([retry!.body]); // claim, settle (+ the attempt written)
    expect(counting.roundTrips()).toBe(2);
    const [done] = h.queue.take();
    counting.reset();
    await h.deliver([done!.body]);
    expect(counting.roundTrips()).toBe(2);
    counting.reset();
    await h.deliver([done!.body]); // a duplicate of a completed step
    expect(counting.roundTrips()).toBe(1);
    counting.reset();
    const trace = await readTrace(counting.db, WS, id);
    expect(counting.roundTrips()).toBe(1);
    expect(trace!.steps.find((s) => s.vertexId === "charge")!.attempts.map((a) => a.outcome)).toEqual(["retried", "completed"]);
  });
});
