/**
 * A destination saying "the request with this key is still running here" (SPEC section 5): after
 * a takeover the step re-sends its persisted key while the first call is still in flight, and a
 * destination following the Idempotency-Key draft — idemflow's own middleware included — answers
 * 409 with Retry-After. The step waits and asks again until the destination answers for real.
 */
import { createExecutionContext, env } from "cloudflare:test";
import { Hono } from "hono";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { idempotency } from "../../src/http/idempotency";
import { idempotencyProblems } from "../../src/http/idempotency/problems";
import { IN_PROGRESS_MARK } from "../../src/ledger";
import { IN_PROGRESS_PROBLEM_CODE, isInProgress } from "../../src/steps/gateway";
import { CRASH_ALLOWANCE } from "../../src/steps/run-step";
import { readTrace } from "../../src/steps/trace";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-in-progress";

beforeEach(() => {
  vi.spyOn(console, "warn").mockImplementation(() => {});
  vi.spyOn(console, "error").mockImplementation(() => {});
});

/**
 * A charge endpoint behind idemflow's own Idempotency-Key middleware on the real D1, on the test's
 * clock; its first handler run hangs until `finishFirstCall()`.
 */
class SlowFirstCallDestination {
  handlerRuns = 0;
  keysSent: Array<string | null> = [];
  statuses: number[] = [];
  readonly firstCallEntered: Promise<void>;
  private enter!: () => void;
  private release!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.release = resolve));
  private readonly app = new Hono();

  constructor(h: Harness) {
    this.firstCallEntered = new Promise((resolve) => (this.enter = resolve));
    const principal = unique("slow-dest");
    const guarded = idempotency({ principal: () => principal, database: () => env.DB, now: h.clock.now, sweep: false });
    this.app.post("/payments/charges", guarded, async (c) => {
      const body = (await c.req.json()) as unknown;
      const run = ++this.handlerRuns;
      if (run === 1) {
        this.enter();
        await this.gate;
      }
      return c.json({ id: `ch_${run}`, received: body }, 201);
    });
  }

  finishFirstCall(): void {
    this.release();
  }

  fetch: typeof fetch = async (input, init) => {
    const request = new Request(input as RequestInfo, init);
    this.keysSent.push(request.headers.get("idempotency-key"));
    const response = await this.app.fetch(request, env, createExecutionContext());
    this.statuses.push(response.status);
    return response;
  };
}

/** A fetch answering idemflow's in-progress problem `times` times (then the real destination). */
function inProgressThen(h: Harness, times: number, retryAfterSeconds: number | null): () => number {
  let answered = 0;
  const real = h.rt.fetch;
  h.rt.fetch = async (input, init) => {
    if (answered >= times) return real(input, init);
    answered++;
    const response = idempotencyProblems.inProgress(retryAfterSeconds ?? 1).toResponse();
    if (retryAfterSeconds === null) response.headers.delete("retry-after");
    return response;
  };
  return () => answered;
}

async function eventsOf(executionId: string): Promise<Array<{ type: string; epoch: number; detail: string | null }>> {
  const { results } = await env.DB.prepare("SELECT type, epoch, detail FROM step_events WHERE execution_id = ?1 ORDER BY id")
    .bind(executionId)
    .all<{ type: string; epoch: number; detail: string | null }>();
  return results;
}

async function budgetCounters(executionId: string): Promise<{ attempt: number; retry_base: number }> {
  return (await env.DB.prepare("SELECT attempt, retry_base FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
    .bind(executionId)
    .first<{ attempt: number; retry_base: number }>())!;
}

describe("a takeover while the first call still runs at a destination behind idemflow's own middleware", () => {
  it("waits on the 409 in-progress answers and completes with the REAL response; the handler ran once", async () => {
    const h = harness({ leaseMs: 5_000 });
    const dest = new SlowFirstCallDestination(h);
    h.rt.fetch = dest.fetch;
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 42 } });
    const [message] = h.queue.take();

    // Worker 1 sends; the destination's handler is charging and hangs past the step's lease.
    const first = h.deliver([message!.body]);
    await dest.firstCallEntered;
    h.clock.advance(5_001);

    // Worker 2 takes the step over and re-sends the persisted key: "in progress" (409; the
    // middleware advertises at most 1 s, maxRetryAfterSeconds).
    await h.deliver([message!.body]);
    expect(dest.statuses).toEqual([409]);
    let charge = (await stepsOf(id)).charge!;
    expect(charge.state).toBe("DISPATCHED");
    expect(charge.error).toMatch(
      new RegExp(`^${IN_PROGRESS_MARK} \\(attempt 2\\): POST localhost:8788/payments/charges answered 409 \\(Retry-After 1 s\\)`),
    );
    // The trace says why the step waits.
    const trace = await readTrace(env.DB, WS, id);
    const traced = trace!.steps.find((s) => s.vertexId === "charge")!;
    expect(traced.error).toMatch(/^waiting: destination says in progress/);
    expect(traced.availableAt).toBe(new Date(h.clock.now() + 1_000).toISOString());

    // Asked again while it still runs: still waiting, and still not counted against any budget.
    const [again] = h.queue.take();
    expect(again!.dueAt - h.clock.now()).toBe(1_000);
    h.clock.t = again!.dueAt;
    await h.deliver([again!.body]);
    expect(dest.statuses).toEqual([409, 409]);
    const counters = await budgetCounters(id);
    expect(counters.attempt - counters.retry_base).toBe(1); // only the hanging attempt counts

    // The first call finishes: its result is stored by the destination, worker 1's settle is fenced out.
    dest.finishFirstCall();
    await first;
    await h.drain();

    charge = (await stepsOf(id)).charge!;
    expect(charge.state).toBe("COMPLETED");
    const output = JSON.parse(charge.output!) as { status: number; body: { id: string } };
    expect(output.status).toBe(201);
    expect(output.body.id).toBe("ch_1"); // the real charge, replayed by the destination
    expect(dest.handlerRuns).toBe(1);
    expect(new Set(dest.keysSent).size).toBe(1);
    expect(dest.keysSent).toHaveLength(4);
    expect(JSON.parse((await stepsOf(id)).done!.output!)).toEqual({ charged: "ch_1" });
    expect(await executionStatus(id)).toBe("COMPLETED");
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(["lease_expired", "attempt_failed", "attempt_failed", "fenced_out"]);
    expect(events.filter((e) => e.type === "attempt_failed").every((e) => e.detail!.startsWith(IN_PROGRESS_MARK))).toBe(true);
  });
});

describe("409-as-processed and clientErrorMode complete never accept an in-progress answer", () => {
  for (const [name, config] of [
    ["conflictAsProcessed", { conflictAsProcessed: true }],
    ["clientErrorMode complete", { clientErrorMode: "complete" }],
  ] as const) {
    for (const [how, retryAfter] of [
      ["409 with Retry-After", 2],
      ["the in-progress problem without Retry-After", null],
    ] as const) {
      it(`${name}: ${how} → waits, then completes with the real 201`, async () => {
        const h = harness();
        const answered = inProgressThen(h, 2, retryAfter);
        const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf"), config));
        const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
        await h.drain();
        expect(answered()).toBe(2);
        const charge = (await stepsOf(id)).charge!;
        expect(charge.state).toBe("COMPLETED");
        const output = JSON.parse(charge.output!) as { status: number; body: { id: string } };
        expect(output.status).toBe(201);
        expect(output.body.id).toMatch(/^ch_/);
        expect(h.dest.effects).toHaveLength(1);
        expect(await executionStatus(id)).toBe("COMPLETED");
      });
    }
  }

  it("recognises the middleware's own problem (code and type), and a 409 with Retry-After; not a plain 409", async () => {
    const problem = idempotencyProblems.inProgress(3);
    expect(problem.code).toBe(IN_PROGRESS_PROBLEM_CODE);
    const body = (await problem.toResponse().json()) as { type: string; code: string };
    expect(isInProgress(409, undefined, body)).toBe(true);
    expect(isInProgress(409, undefined, { type: body.type })).toBe(true);
    expect(isInProgress(409, 3000, { error: "anything" })).toBe(true);
    expect(isInProgress(409, undefined, { error: "duplicate external_id" })).toBe(false);
    expect(isInProgress(503, 3000, body)).toBe(false);
  });
});

describe("in-progress answers are not failures", () => {
  it("with maxAttempts 1, more in-progress answers than the crash allowance still end in COMPLETED", async () => {
    const h = harness();
    const times = CRASH_ALLOWANCE + 5;
    const answered = inProgressThen(h, times, 1);
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf"), { retry: { maxAttempts: 1 } }));
    const id = await h.start(wf, { order: { id: unique("O"), total: 7 } });
    await h.drain();
    expect(answered()).toBe(times);
    const charge = (await stepsOf(id)).charge!;
    expect(charge.state).toBe("COMPLETED");
    expect(charge.attempt).toBe(times + 1);
    expect(h.dest.effects).toHaveLength(1);
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("an ordinary failure after in-progress answers still gets its full retry budget", async () => {
    const h = harness();
    inProgressThen(h, 3, 1);
    h.dest.fault("/payments/charges", 503, 1);
    const wf = await seedWorkflow(
      WS,
      chargeWorkflow(unique("wf"), { retry: { maxAttempts: 2, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 } }),
    );
    const id = await h.start(wf, { order: { id: unique("O"), total: 7 } });
    await h.drain();
    const charge = (await stepsOf(id)).charge!;
    expect(charge.state).toBe("COMPLETED");
    expect(charge.attempt).toBe(5);
  });
});

describe("the in-progress budget", () => {
  it("runs out → FAILED with a clear error naming the budget; the last ask falls at its end", async () => {
    const h = harness();
    const answered = inProgressThen(h, Number.POSITIVE_INFINITY, 10);
    const wf = await seedWorkflow(
      WS,
      chargeWorkflow(unique("wf"), {
        retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 25_000, inProgressBudgetMs: 60_000 },
      }),
    );
    const t0 = h.clock.now();
    const id = await h.start(wf, { order: { id: unique("O"), total: 7 } });
    await h.drain();
    const charge = (await stepsOf(id)).charge!;
    expect(charge.state).toBe("FAILED");
    expect(charge.error).toMatch(
      new RegExp(
        'still answers "in progress" for this step\'s key 60 s after it first did: ' +
          "the in-progress budget \\(retry\\.inProgressBudgetMs 60000 ms\\) ran out",
      ),
    );
    expect(answered()).toBe(7); // at 0, 10, …, 60 s
    expect(h.clock.now() - t0).toBe(60_000);
    expect(await executionStatus(id)).toBe("FAILED");
  });

  it("a Retry-After above the ceiling is waited at the ceiling, not refused", async () => {
    const h = harness();
    inProgressThen(h, 1, 30 * 24 * 3600); // a month
    const wf = await seedWorkflow(
      WS,
      chargeWorkflow(unique("wf"), { retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 20_000 } }),
    );
    const id = await h.start(wf, { order: { id: unique("O"), total: 7 } });
    const [message] = h.queue.take();
    await h.deliver([message!.body]);
    const [next] = h.queue.take();
    expect(next!.dueAt - h.clock.now()).toBe(20_000);
    h.clock.t = next!.dueAt;
    await h.deliver([next!.body]);
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
  });

  it("an operator retry starts a fresh budget (it counts from the first in-progress answer since the step was reopened)", async () => {
    const { retryFailedStep } = await import("../../src/ledger");
    const h = harness();
    const answered = inProgressThen(h, 4, 10);
    const wf = await seedWorkflow(
      WS,
      chargeWorkflow(unique("wf"), {
        retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 10_000, inProgressBudgetMs: 20_000 },
      }),
    );
    const id = await h.start(wf, { order: { id: unique("O"), total: 7 } });
    await h.drain();
    expect(answered()).toBe(3); // 0, 10, 20 s → out of budget
    expect((await stepsOf(id)).charge!.state).toBe("FAILED");
    h.clock.advance(3_600_000);
    expect(await retryFailedStep(env.DB, WS, { executionId: id, vertexId: "charge" }, h.clock.now())).toEqual({
      retried: true,
      acknowledged: false,
    });
    await h.deliver([{ executionId: id, vertexId: "charge" }]);
    expect((await stepsOf(id)).charge!.state).toBe("DISPATCHED"); // a 4th in-progress answer: a fresh budget, waiting
    await h.drain();
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
  });
});
