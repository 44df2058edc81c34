/**
 * `Retry-After` is honoured up to a ceiling (the vertex's `retry.maxDelayMs`, within
 * MAX_RETRY_AFTER_MS); a destination demanding more fails the step naming both numbers, and no
 * time derived from a destination's header is stored out of a timestamp's range (SPEC section 5).
 */
import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { DEFAULT_RETRY } from "../../src/definitions/schema";
import { MAX_RETRY_AFTER_MS, parseRetryAfter, planRetry, retryAfterCeilingMs } from "../../src/steps/retry-policy";
import { readTrace } from "../../src/steps/trace";
import { chargeWorkflow, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-retry-after";
const NOW = Date.UTC(2030, 0, 1);

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => {});
  vi.spyOn(console, "error").mockImplementation(() => {});
});

describe("parseRetryAfter", () => {
  it("reads delay-seconds and HTTP dates; a huge value stays a finite number; garbage is ignored", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120_000);
    expect(parseRetryAfter(" 0 ", NOW)).toBe(0);
    expect(parseRetryAfter("9".repeat(400), NOW)).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseRetryAfter(new Date(NOW + 90_000).toUTCString(), NOW)).toBe(90_000);
    expect(parseRetryAfter("Thu, 01 Jan 1970 00:00:00 GMT", NOW)).toBe(0); // in the past: now
    expect(parseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", NOW)).toBe(Date.UTC(9999, 11, 31, 23, 59, 59) - NOW);
    for (const garbage of ["soon", "-1", "1.5", "", "1e9", "Infinity", "NaN"]) expect(parseRetryAfter(garbage, NOW)).toBeUndefined();
    expect(parseRetryAfter(null, NOW)).toBeUndefined();
  });
});

describe("planRetry", () => {
  it("honours Retry-After up to the ceiling and refuses a longer demand naming both numbers", () => {
    const policy = { ...DEFAULT_RETRY, backoff: "fixed" as const, initialDelayMs: 1000, maxDelayMs: 60_000 };
    expect(planRetry(policy, 1, () => 0.5, 60_000)).toEqual({ delayMs: 60_000 });
    expect(planRetry(policy, 1, () => 0.5, undefined)).toEqual({ delayMs: 1000 });
    const refused = planRetry(policy, 1, () => 0.5, 61_000);
    expect(refused).toEqual({ refused: expect.stringMatching(/asked to wait 61 s \(Retry-After\), over this step's ceiling of 60000 ms/) });
  });

  it("the ceiling never exceeds the global maximum, whatever a policy says", () => {
    expect(retryAfterCeilingMs({ ...DEFAULT_RETRY, maxDelayMs: 1e15 })).toBe(MAX_RETRY_AFTER_MS);
    expect(MAX_RETRY_AFTER_MS).toBe(24 * 3_600_000);
  });
});

/** Every time in the trace is null or a valid ISO timestamp, and the step row's times are in range. */
async function expectRenderableTimes(executionId: string): Promise<void> {
  const trace = await readTrace(env.DB, WS, executionId);
  expect(trace).not.toBeNull();
  const times: Array<string | null> = [trace!.createdAt, trace!.finishedAt, trace!.lastDuplicateAt];
  for (const step of trace!.steps) {
    times.push(step.leaseUntil, step.availableAt, step.createdAt, step.finishedAt, ...step.events.map((e) => e.at));
  }
  expect(trace!.createdAt).not.toBeNull();
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
  expect(times.filter((t) => t !== null && !iso.test(t))).toEqual([]);
  const { results } = await env.DB.prepare("SELECT available_at, lease_until FROM steps WHERE execution_id = ?1").bind(executionId).all<{
    available_at: number;
    lease_until: number | null;
  }>();
  expect(results.length).toBeGreaterThan(0);
  for (const r of results) {
    expect(Math.abs(r.available_at)).toBeLessThan(8.64e15);
    expect(Math.abs(r.lease_until ?? 0)).toBeLessThan(8.64e15); // null: no lease
  }
}

async function answeredOnce(retryAfter: string, status = 503, retry: Record<string, unknown> = {}) {
  const h = harness();
  const wf = await seedWorkflow(
    WS,
    chargeWorkflow(unique("wf"), { retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000, ...retry } }),
  );
  const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
  h.dest.fault("/payments/charges", status, 1, { headers: { "retry-after": retryAfter } });
  const [message] = h.queue.take();
  await h.deliver([message!.body]);
  return { h, id };
}

describe("a destination's Retry-After on an ordinary failure", () => {
  it("over the vertex's maxDelayMs → FAILED at once, naming both numbers; nothing scheduled", async () => {
    const { h, id } = await answeredOnce("600", 503, { maxDelayMs: 300_000 });
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("FAILED");
    expect(step.attempt).toBe(1);
    expect(step.error).toMatch(
      new RegExp(
        "answered 503: the destination asked to wait 600 s \\(Retry-After\\), over this step's ceiling of 300000 ms " +
          "\\(retry\\.maxDelayMs 300000, at most 86400000\\); not retried",
      ),
    );
    expect(h.queue.pending).toHaveLength(0);
    expect(h.dest.requests).toHaveLength(1);
    await expectRenderableTimes(id);
  });

  it("exactly at the ceiling is honoured", async () => {
    const { h, id } = await answeredOnce("300", 429, { maxDelayMs: 300_000 });
    expect((await stepsOf(id)).charge!.state).toBe("DISPATCHED");
    const [next] = h.queue.take();
    expect(next!.dueAt - h.clock.now()).toBe(300_000);
  });

  for (const [what, value] of [
    ["centuries in delay-seconds", String(10 ** 13)],
    ["400 digits", "9".repeat(400)],
    ["an HTTP date in year 9999", "Fri, 31 Dec 9999 23:59:59 GMT"],
  ] as const) {
    it(`${what} → FAILED with a clear error, never a time out of range; the trace renders`, async () => {
      const { h, id } = await answeredOnce(value, 429, { maxDelayMs: 86_400_000 });
      const step = (await stepsOf(id)).charge!;
      expect(step.state).toBe("FAILED");
      expect(step.error).toMatch(/over this step's ceiling of 86400000 ms/);
      expect(h.queue.pending).toHaveLength(0);
      await expectRenderableTimes(id);
    });
  }

  for (const [what, value] of [
    ["an HTTP date in the past", "Thu, 01 Jan 1970 00:00:00 GMT"],
    ["garbage", "soon, maybe"],
    ["a negative number", "-5"],
  ] as const) {
    it(`${what} → the ordinary backoff, then COMPLETED`, async () => {
      const { h, id } = await answeredOnce(value, 503, { maxDelayMs: 60_000 });
      const [next] = h.queue.take();
      expect(next!.dueAt - h.clock.now()).toBe(1000);
      await expectRenderableTimes(id);
      h.clock.t = next!.dueAt;
      await h.deliver([next!.body]);
      expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
    });
  }
});

describe("the trace renders whatever a row holds", () => {
  it("a stored time out of Date's range (written by an older version) renders as null instead of failing the whole trace", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    await env.DB.prepare("UPDATE steps SET available_at = ?2 WHERE execution_id = ?1 AND vertex_id = 'charge'").bind(id, 1e17).run();
    const trace = await readTrace(env.DB, WS, id);
    expect(trace!.steps.find((s) => s.vertexId === "charge")!.availableAt).toBeNull();
  });
});
