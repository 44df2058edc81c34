/**
 * WAIT_FOR_EVENT (SPEC section 14, docs/waits.md): a step parked until an event with its name and
 * correlation value arrives, or its timeout. Events are deduplicated, buffered before a wait starts,
 * and meet a wait exactly once whichever commits first. Real D1, the real consumer and delivery
 * batch, the harness's clock and queue.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { validateDefinition } from "../../src/definitions/validate";
import { reap } from "../../src/steps/reaper";
import { countingD1 } from "../helpers/counting-d1";
import { sendEvent, startParked, waitingWorkflow } from "./wait-helpers";
import { callApp, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const WS = "dev";

const waiting = (config: Record<string, unknown> = {}, id?: string): WorkflowDefinitionInput =>
  waitingWorkflow("payment.confirmed", config, id);

const send = sendEvent;

async function stepRow(executionId: string, vertexId = "confirm") {
  return env.DB.prepare(
    "SELECT state, epoch, parked_until, lease_until, output, error FROM steps WHERE execution_id = ?1 AND vertex_id = ?2",
  )
    .bind(executionId, vertexId)
    .first<{
      state: string;
      epoch: number;
      parked_until: number | null;
      lease_until: number;
      output: string | null;
      error: string | null;
    }>();
}

async function consumptionsOf(executionId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM event_consumptions WHERE execution_id = ?1")
    .bind(executionId)
    .first<{ n: number }>();
  return row!.n;
}

/** Delivers the messages already due (not the delayed wake-ups of a timeout), until none is. */
async function deliverDue(h: Harness): Promise<void> {
  for (let round = 0; round < 10; round++) {
    const due = h.queue.pending.filter((m) => m.dueAt <= h.clock.now());
    if (due.length === 0) return;
    h.queue.pending = h.queue.pending.filter((m) => !due.includes(m));
    for (const m of due) await h.deliver([m.body]);
  }
}

/** Starts a waiting execution and delivers its wait's first message: the step registers and parks. */
const parkedWait = (h: Harness, order: string | number, config: Record<string, unknown> = {}) => startParked(h, waiting(config), order);

describe("saving a WAIT_FOR_EVENT", () => {
  const errors = (config: Record<string, unknown>) => {
    const result = validateDefinition(waiting(config));
    return result.ok ? [] : result.errors.map((e) => [e.pointer, e.code]);
  };

  it("takes a timeout up to 365 days, a match expression and optional decisions, each once", () => {
    expect(errors({ timeout: "365d" })).toEqual([]);
    expect(errors({ timeout: "366d" })).toEqual([["/vertices/1/config/timeout", "duration-too-long"]]);
    expect(errors({ decisions: ["approve", "reject"] })).toEqual([]);
    expect(errors({ decisions: ["approve", "approve"] })).toEqual([["/vertices/1/config/decisions/1", "duplicate-decision"]]);
    expect(errors({ match: "payload.order" })).not.toEqual([]); // an expression, with `=`
    expect(errors({ onTimeout: "ignore" })).not.toEqual([]);
    expect(errors({ event: "no spaces" })).not.toEqual([]);
  });
});

describe("a wait parks until its event", () => {
  it("parks with nothing held; the event un-parks it in its own batch and its claim completes with the event", async () => {
    const h = harness();
    const order = unique("A");
    const { id } = await parkedWait(h, order);
    const parked = await stepRow(id);
    expect(parked).toMatchObject({ state: "EXECUTING", parked_until: h.clock.now() + 3 * DAY });
    expect(h.queue.pending).toEqual([]); // 3 days is past the queue's delay: the cron wakes it on timeout
    // Early messages are acked at once, never bounced; the reaper leaves it alone.
    expect((await h.deliver([{ executionId: id, vertexId: "confirm" }], {}, 5)).explicitAcks).toHaveLength(1);
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 0 });

    h.clock.t += 60_000;
    const { answer } = await send(h, { name: "payment.confirmed", match: order, id: "evt_1", data: { amount: 12 } });
    expect(answer).toMatchObject({ eventId: "evt_1", deduplicated: false, resumed: [id], buffered: false });
    // Woken, not lost: still parked, until now (so the claim that resumes it records no lease_expired).
    expect(await stepRow(id)).toMatchObject({ state: "EXECUTING", parked_until: h.clock.now(), lease_until: h.clock.now() });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(JSON.parse(steps.confirm!.output!)).toEqual({
      name: "payment.confirmed",
      id: "evt_1",
      match: order,
      data: { amount: 12 },
      receivedAt: new Date(h.clock.now()).toISOString(),
    });
    expect(JSON.parse(steps.done!.output!)).toEqual({ got: { amount: 12 } });
  });

  it("an event delivered before the wait starts is buffered and taken when it starts — no park", async () => {
    const h = harness();
    const order = unique("B");
    const { answer } = await send(h, { name: "payment.confirmed", match: order, data: { early: true } });
    expect(answer).toMatchObject({ deduplicated: false, resumed: [], buffered: true });
    h.clock.t += HOUR;
    const wf = await seedWorkflow(WS, waiting());
    const id = await h.start(wf, { order });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(JSON.parse((await stepsOf(id)).done!.output!)).toEqual({ got: { early: true } });
    // Taken once: a second wait on the same value does not get it again.
    const second = await h.start(wf, { order });
    await deliverDue(h);
    expect((await stepRow(second))?.parked_until).not.toBeNull();
  });

  it("a buffered event past its buffer window is not taken", async () => {
    const h = harness();
    const order = unique("C");
    await send(h, { name: "payment.confirmed", match: order });
    h.clock.t += DAY + 1; // EVENT_BUFFER: 24h by default
    const { id } = await parkedWait(h, order);
    expect((await stepRow(id))?.parked_until).not.toBeNull();
    expect(await consumptionsOf(id)).toBe(0);
  });

  it("another workspace's event, another name, or another type of value never matches", async () => {
    const h = harness();
    const { id } = await parkedWait(h, 1001);
    await send(h, { name: "payment.confirmed", match: 1001 }, "other-workspace");
    await send(h, { name: "payment.refunded", match: 1001 });
    await send(h, { name: "payment.confirmed", match: "1001" }); // a string is not the number
    expect(await consumptionsOf(id)).toBe(0);
    // 1001.0 is JSON's 1001: it matches, as the trigger identity compares numbers.
    const { answer } = await send(h, { name: "payment.confirmed", match: 1001.0, data: "x" });
    expect(answer.resumed).toEqual([id]);
  });
});

describe("user-named members", () => {
  it("event data with `__proto__`, `constructor` and `toString` members arrives as own members, polluting nothing", async () => {
    const h = harness();
    const order = "__proto__"; // a valid correlation value too
    const { id } = await parkedWait(h, order);
    const raw = '{"name":"payment.confirmed","match":"__proto__","data":{"__proto__":{"polluted":true},"constructor":"c","toString":"t"}}';
    const sent = await callApp(h, "POST", "/v1/events", { body: raw });
    expect(sent.status).toBe(202);
    expect(await sent.json()).toMatchObject({ resumed: [id] });
    await h.drain();
    const output = JSON.parse((await stepsOf(id)).done!.output!) as { got: Record<string, unknown> };
    expect(Object.hasOwn(output.got, "__proto__")).toBe(true);
    expect(Object.keys(output.got).sort()).toEqual(["__proto__", "constructor", "toString"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("duplicates and races", () => {
  it("fifty concurrent deliveries of one event resume one wait once; forty-nine answer as duplicates", async () => {
    const h = harness();
    const order = unique("D");
    const { id } = await parkedWait(h, order);
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => send(h, { name: "payment.confirmed", match: order, id: `evt-${order}` }).then((r) => r.answer)),
    );
    expect(answers.filter((a) => !a.deduplicated)).toHaveLength(1);
    expect(answers.filter((a) => a.deduplicated)).toHaveLength(49);
    // Every duplicate answers with the first delivery's outcome.
    for (const a of answers) expect(a.resumed).toEqual([id]);
    expect(h.queue.pending.filter((m) => m.body.executionId === id)).toHaveLength(1);
    const row = await env.DB.prepare("SELECT duplicates FROM events WHERE workspace = ?1 AND event_id = ?2")
      .bind(WS, `evt-${order}`)
      .first<{ duplicates: number }>();
    expect(row?.duplicates).toBe(49);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await consumptionsOf(id)).toBe(1);
  });

  it("data up to 256 KiB is taken (under D1's limits); one byte more is refused and records nothing", async () => {
    const h = harness();
    const order = unique("T");
    const filler = (n: number) => "x".repeat(n - 2); // a JSON string's quotes count
    const fits = await callApp(h, "POST", "/v1/events", { body: { name: "payment.confirmed", match: order, data: filler(262_144) } });
    expect(fits.status).toBe(202);
    const over = await callApp(h, "POST", "/v1/events", {
      body: { name: "payment.confirmed", match: `${order}-2`, data: filler(262_145) },
    });
    expect(over.status).toBe(422);
    expect(await over.json()).toMatchObject({ code: "event-invalid", pointer: "/data" });
    const stored = await env.DB.prepare("SELECT count(*) AS n FROM events WHERE workspace = ?1 AND match_value = ?2")
      .bind(WS, JSON.stringify(`${order}-2`))
      .first<{ n: number }>();
    expect(stored?.n).toBe(0);
  });

  it("without an id, the content deduplicates within EVENT_DEDUPE_WINDOW; the same content a window later is a new event", async () => {
    const h = harness();
    const order = unique("E");
    const first = await send(h, { name: "payment.confirmed", match: order, data: { b: 1, a: 2 } });
    const again = await send(h, { name: "payment.confirmed", match: order, data: { a: 2, b: 1 } }); // key order does not matter
    expect(again.answer).toMatchObject({ deduplicated: true, eventId: first.answer.eventId, duplicates: 1 });
    h.clock.t += DAY + 1;
    const later = await send(h, { name: "payment.confirmed", match: order, data: { a: 2, b: 1 } });
    expect(later.answer.deduplicated).toBe(false);
    expect(later.answer.eventId).not.toBe(first.answer.eventId);
  });

  it("an event committing between the wait's registration and its park is caught by the park (resumed at once)", async () => {
    const h = harness();
    const order = unique("F");
    const wf = await seedWorkflow(WS, waiting());
    const id = await h.start(wf, { order });
    const [first] = h.queue.take();
    await h.deliver([first!.body], {
      afterRun: async () => {
        const { answer } = await send(h, { name: "payment.confirmed", match: order, data: "between" });
        // The wait was registered but not parked: the event took it, and could not un-park it.
        expect(answer.resumed).toEqual([id]);
      },
    });
    // The park saw the event: the step is claimable now and its message went at once.
    expect(await stepRow(id)).toMatchObject({ state: "EXECUTING", parked_until: h.clock.now(), lease_until: h.clock.now() });
    expect(h.queue.pending.map((m) => m.dueAt)).toEqual([h.clock.now()]);
    await h.drain();
    expect(JSON.parse((await stepsOf(id)).done!.output!)).toEqual({ got: "between" });
  });

  it("an event and a wait committing at the same moment meet exactly once, in either order", async () => {
    for (let round = 0; round < 6; round++) {
      const h = harness();
      const order = unique("G");
      const wf = await seedWorkflow(WS, waiting());
      const id = await h.start(wf, { order });
      const [first] = h.queue.take();
      const wait = h.deliver([first!.body]);
      const event = send(h, { name: "payment.confirmed", match: order, data: round });
      const { answer } = round % 2 === 0 ? (await Promise.all([wait, event]))[1] : (await Promise.all([event, wait]))[0];
      await h.drain();
      expect(await executionStatus(id)).toBe("COMPLETED");
      expect(await consumptionsOf(id)).toBe(1);
      // The event either took the registered wait (resumed) or was buffered and taken by the wait's own batch.
      expect(answer.resumed.length + (answer.buffered ? 1 : 0)).toBe(1);
      expect(JSON.parse((await stepsOf(id)).done!.output!)).toEqual({ got: round });
    }
  });

  it("a duplicate of a taken event never resumes a wait that started after it", async () => {
    const h = harness();
    const order = unique("R");
    const first = await parkedWait(h, order);
    const event = { name: "payment.confirmed", match: order, id: `taken-${order}` };
    expect((await send(h, event)).answer.resumed).toEqual([first.id]);
    const second = await parkedWait(h, order);
    const again = await send(h, event);
    expect(again.answer).toMatchObject({ deduplicated: true, resumed: [first.id] });
    expect(await consumptionsOf(second.id)).toBe(0);
    expect((await stepRow(second.id))?.parked_until).not.toBeNull();
  });

  it("an event that commits after the wait timed out, before its settle, is not given to it: it stays buffered", async () => {
    const h = harness();
    const order = unique("S");
    const { id } = await parkedWait(h, order, { timeout: "10m" });
    h.clock.t += 10 * 60_000 + 1;
    let answer: Awaited<ReturnType<typeof send>>["answer"] | undefined;
    await h.deliver([{ executionId: id, vertexId: "confirm" }], {
      afterRun: async () => {
        ({ answer } = await send(h, { name: "payment.confirmed", match: order }));
      },
    });
    expect(answer).toMatchObject({ resumed: [], buffered: true });
    expect(await stepRow(id)).toMatchObject({ state: "FAILED" });
    expect(await consumptionsOf(id)).toBe(0);
  });

  it("a timeout racing an event has one outcome: the event goes to the wait, or stays buffered for the next", async () => {
    const outcomes = new Set<string>();
    for (let round = 0; round < 6; round++) {
      const h = harness();
      const order = unique("H");
      const { id } = await parkedWait(h, order, { timeout: "10m" });
      h.clock.t += 10 * 60_000 + 1;
      const wake = h.deliver([{ executionId: id, vertexId: "confirm" }]);
      const event = send(h, { name: "payment.confirmed", match: order, data: "late" });
      const { answer } = round % 2 === 0 ? (await Promise.all([wake, event]))[1] : (await Promise.all([event, wake]))[0];
      await h.drain();
      const step = await stepRow(id);
      if (step?.state === "COMPLETED") {
        outcomes.add("event");
        expect(answer.resumed).toEqual([id]);
        expect(await consumptionsOf(id)).toBe(1);
      } else {
        outcomes.add("timeout");
        expect(step).toMatchObject({ state: "FAILED", error: expect.stringMatching(/before its timeout/) });
        expect(answer).toMatchObject({ resumed: [], buffered: true });
        expect(await consumptionsOf(id)).toBe(0);
      }
    }
    expect(outcomes.size).toBeGreaterThanOrEqual(1);
  });
});

describe("timeouts, cancel, start over, operator retry", () => {
  it("onTimeout continue completes with null so an edge's `when` can route on it; fail fails the step", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      ...waiting({ timeout: "30m", onTimeout: "continue" }),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        {
          id: "confirm",
          type: "WAIT_FOR_EVENT",
          config: { event: "payment.confirmed", match: "= payload.order", timeout: "30m", onTimeout: "continue" },
        },
        { id: "done", type: "TRANSFORM", config: { output: "confirmed" } },
        { id: "chase", type: "TRANSFORM", config: { output: "chased" } },
      ],
      edges: [
        { from: "entry", to: "confirm" },
        { from: "confirm", to: "done", when: "= steps.confirm != null" },
        { from: "confirm", to: "chase", when: "= steps.confirm = null" },
      ],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, { order: unique("I") });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(steps.confirm?.output).toBe("null");
    expect(steps.chase?.state).toBe("COMPLETED");
    expect(steps.done?.state).toBe("SKIPPED");

    const failing = await parkedWait(h, unique("J"), { timeout: "30m" });
    await h.drain();
    expect(await executionStatus(failing.id)).toBe("FAILED");
  });

  it("cancel of a waiting execution: the wait is cancelled and a later event does not resume it (it stays buffered)", async () => {
    const h = harness();
    const order = unique("K");
    const { id } = await parkedWait(h, order);
    const cancelled = await callApp(h, "POST", `/v1/executions/${id}/cancel`, { key: unique("cancel") });
    expect(cancelled.status).toBe(200);
    expect((await stepRow(id))?.state).toBe("CANCELLED");
    const { answer } = await send(h, { name: "payment.confirmed", match: order });
    expect(answer).toMatchObject({ resumed: [], buffered: true });
  });

  it("an event taken once is never taken again: not by a start over, not by an operator retry of a timed-out wait", async () => {
    const h = harness();
    const order = unique("L");
    const { wf, id } = await parkedWait(h, order, { timeout: "1h" });
    await send(h, { name: "payment.confirmed", match: order, id: `once-${order}` });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    // A start over waits again, for a new event.
    const over = await h.startOver(wf, { order }, id);
    await deliverDue(h);
    expect((await stepRow(over.executionId))?.parked_until).not.toBeNull();
    expect(await consumptionsOf(over.executionId)).toBe(0);

    // A wait that timed out, retried by the operator, registers anew and waits for a new event.
    const timedOut = await parkedWait(h, unique("M"), { timeout: "10m" });
    await h.drain();
    expect(await executionStatus(timedOut.id)).toBe("FAILED");
    const retried = await callApp(h, "POST", `/v1/executions/${timedOut.id}/steps/confirm/retry`, { key: unique("retry") });
    expect(retried.status).toBe(202);
    await deliverDue(h);
    expect((await stepRow(timedOut.id))?.parked_until).not.toBeNull();
  });

  it("a wait that outlives its entry point's dedupe window: the sender's retry is still a duplicate of the running execution", async () => {
    const h = harness();
    const order = unique("N");
    const wf = await seedWorkflow(WS, {
      ...waiting({ timeout: "3d" }),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order", dedupeWindow: "1h" } },
        { id: "confirm", type: "WAIT_FOR_EVENT", config: { event: "payment.confirmed", match: "= payload.order", timeout: "3d" } },
        { id: "done", type: "TRANSFORM", config: { output: "= steps.confirm.data" } },
      ],
    } as WorkflowDefinitionInput);
    const trigger = () =>
      callApp(h, "POST", `/v1/workflows/${wf.definition.id}/trigger`, { body: { order } }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as { executionId: string },
      }));
    const first = await trigger();
    expect(first.status).toBe(202);
    await deliverDue(h);
    h.clock.t += 2 * HOUR;
    const before = Date.now();
    vi.setSystemTime(before + 2 * HOUR); // the trigger route reads the wall clock
    try {
      expect(Date.now()).toBeGreaterThan(before + HOUR);
      const retry = await trigger();
      expect(retry.body.executionId).toBe(first.body.executionId);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("budgets", () => {
  it("an event delivery is one round trip; a wait costs claim, wait batch and park, its resume claim, wait batch and settle", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const order = unique("P");
    const wf = await seedWorkflow(WS, waiting());
    const id = await h.start(wf, { order });
    const [first] = h.queue.take();
    counting.reset();
    await h.deliver([first!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "batch"]);
    counting.reset();
    await send(h, { name: "payment.confirmed", match: order });
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch"]);
    expect(counting.statements()).toBeLessThanOrEqual(6);
    const [resume] = h.queue.take();
    counting.reset();
    await h.deliver([resume!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "batch"]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
  });
});

describe("POST /v1/events and GET /v1/waits", () => {
  it("answer 202 for a new event, 200 for a duplicate, 422 with a pointer for a bad one; list the open waits", async () => {
    const h = harness();
    const order = unique("Q");
    const { id } = await parkedWait(h, order);
    const listed = await callApp(h, "GET", `/v1/waits?event=payment.confirmed&match=${order}`);
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { waits: Array<{ executionId: string }> }).waits.map((w) => w.executionId)).toEqual([id]);

    const bad = await callApp(h, "POST", "/v1/events", { body: { name: "payment.confirmed", match: { order } } });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toMatchObject({ code: "event-invalid", pointer: "/match" });
    const big = await callApp(h, "POST", "/v1/events", { body: `{"name":"x","match":12345678901234567890}` });
    expect(big.status).toBe(422);

    const sent = await callApp(h, "POST", "/v1/events", { body: { name: "payment.confirmed", match: order, id: `api-${order}` } });
    expect(sent.status).toBe(202);
    expect(await sent.json()).toMatchObject({ resumed: [id], deduplicated: false });
    const dup = await callApp(h, "POST", "/v1/events", { body: { name: "payment.confirmed", match: order, id: `api-${order}` } });
    expect(dup.status).toBe(200);
    expect(await dup.json()).toMatchObject({ resumed: [id], deduplicated: true });
    const after = await callApp(h, "GET", `/v1/waits?event=payment.confirmed&match=${order}`);
    expect(((await after.json()) as { waits: unknown[] }).waits).toEqual([]);
    // A typed value is read as a string and, when it is JSON, as that value too (as ?identity= reads it).
    const numeric = await parkedWait(h, 4242);
    const listed4242 = async (match: string) =>
      (
        (await (await callApp(h, "GET", `/v1/waits?event=payment.confirmed&match=${encodeURIComponent(match)}`)).json()) as {
          waits: Array<{ executionId: string }>;
        }
      ).waits.map((w) => w.executionId);
    expect(await listed4242("4242")).toEqual([numeric.id]);
    expect(await listed4242('"4242"')).toEqual([]);
    // The stats count the workspace's events and the duplicates they absorbed.
    const stats = (await (await callApp(h, "GET", "/v1/stats")).json()) as { events: { received: number; duplicates: number } };
    expect(stats.events.received).toBeGreaterThanOrEqual(1);
    expect(stats.events.duplicates).toBeGreaterThanOrEqual(1);
  });
});
