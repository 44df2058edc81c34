/**
 * The trace of a WAIT_FOR_EVENT step (docs/steps.md "The trace of a wait"): its `wait` — the event
 * and correlation value it waits for, its timeout, the definition's decisions — and the events that
 * arrived on its name and correlation value, each `taken` (by this wait), `taken-elsewhere`,
 * `buffered` or `expired`. Read in the trace's one batch, and the same in the archive's set read.
 * Real D1, the real consumer and delivery batch, the harness's clock.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { readTraceRecordsForSet, readTraceSizes, TRACE_SET_QUERIES, TRACE_WAIT_EVENTS_MAX } from "../../src/ledger";
import { buildTrace, readTrace, type Trace } from "../../src/steps/trace";
import refundApproval from "../../workflows/refund-approval.json?raw";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf, GROWING_TABLES } from "../helpers/query-plans";
import { sendEvent, startParked, waitingWorkflow } from "./wait-helpers";
import { callApp, executionStatus, harness, seedWorkflow, unique, type Harness } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const WS = "dev";

const waiting = (config: Record<string, unknown> = {}, id?: string): WorkflowDefinitionInput =>
  waitingWorkflow("refund.decided", config, id);

const send = sendEvent;

/** Starts a waiting execution and delivers its wait's first message: the step registers and parks. */
const parkedWait = (h: Harness, order: string | number, config: Record<string, unknown> = {}) => startParked(h, waiting(config), order);

async function traceAt(h: Harness, id: string): Promise<Trace> {
  return (await readTrace(env.DB, WS, id, h.clock.now()))!;
}

const stepOf = (trace: Trace, vertexId: string) => trace.steps.find((s) => s.vertexId === vertexId)!;
const iso = (ms: number) => new Date(ms).toISOString();

describe("the trace of a wait", () => {
  it("a waiting step: its event, correlation value, timeout and decisions; a step not registered yet: the definition's", async () => {
    const h = harness();
    const order = unique("A");
    const wf = await seedWorkflow(WS, waiting({ decisions: ["approve", "reject"] }));
    const id = await h.start(wf, { order });
    // Dispatched, not claimed yet: no registration, so no correlation value, no times, no events.
    expect(stepOf(await traceAt(h, id), "confirm").wait).toEqual({
      event: "refund.decided",
      match: null,
      consume: "one",
      registeredAt: null,
      timeoutAt: null,
      timedOut: false,
      decisions: ["approve", "reject"],
      events: [],
    });
    const registeredAt = h.clock.now();
    await h.deliver(h.queue.take().map((m) => m.body));
    const trace = await traceAt(h, id);
    const confirm = stepOf(trace, "confirm");
    expect(confirm.state).toBe("EXECUTING");
    expect(confirm.parkedUntil).toBe(iso(registeredAt + 3 * DAY));
    expect(confirm.wait).toEqual({
      event: "refund.decided",
      match: order,
      consume: "one",
      registeredAt: iso(registeredAt),
      timeoutAt: iso(registeredAt + 3 * DAY),
      timedOut: false,
      decisions: ["approve", "reject"],
      events: [],
    });
    // The attempt that parked it reads `slept`, as a DELAY's (the step's `wait` says it waits for an event).
    expect(confirm.attempts.map((a) => a.outcome)).toEqual(["slept"]);
    // Every other step has no wait.
    expect(trace.steps.filter((s) => s.vertexId !== "confirm").map((s) => s.wait)).toEqual(
      trace.steps.filter((s) => s.vertexId !== "confirm").map(() => null),
    );

    // A number correlates as a number; no decisions declared: null.
    const numeric = await parkedWait(h, 1001);
    expect(stepOf(await traceAt(h, numeric.id), "confirm").wait).toMatchObject({ match: 1001, decisions: null, events: [] });
  });

  it("lists the events on its name and correlation value, newest first: taken, taken elsewhere, buffered, expired", async () => {
    const h = harness();
    const order = unique("B");
    // Sent a day and more before the wait: its buffer ended, nobody took it.
    const old = await send(h, { name: "refund.decided", match: order, id: `old-${order}` });
    // Not on this wait: another correlation value, another name, another workspace.
    await send(h, { name: "refund.decided", match: `${order}-x`, id: `other-match-${order}` });
    await send(h, { name: "refund.other", match: order, id: `other-name-${order}` });
    await send(h, { name: "refund.decided", match: order, id: `other-ws-${order}` }, "other");
    h.clock.t += DAY + 1;

    const a = await parkedWait(h, order);
    expect(stepOf(await traceAt(h, a.id), "confirm").wait?.events).toEqual([
      { eventId: `old-${order}`, receivedAt: old.answer.receivedAt, source: null, duplicates: 0, state: "expired" },
    ]);

    h.clock.t += 60_000;
    const first = await send(h, { name: "refund.decided", match: order, id: `e1-${order}`, data: { decision: "approve" } });
    expect(first.answer.resumed).toEqual([a.id]);
    h.clock.t += 1_000;
    expect((await send(h, { name: "refund.decided", match: order, id: `e1-${order}` })).answer.deduplicated).toBe(true);
    await h.drain();
    expect(await executionStatus(a.id)).toBe("COMPLETED");

    // A second execution waits on the same value: the first one's event is taken elsewhere for it.
    h.clock.t += 60_000;
    const b = await parkedWait(h, order);
    h.clock.t += 60_000;
    const second = await send(h, { name: "refund.decided", match: order, id: `e2-${order}` });
    expect(second.answer.resumed).toEqual([b.id]);
    await h.drain();
    // Nobody waits any more: the next one is buffered.
    h.clock.t += 60_000;
    const third = await send(h, { name: "refund.decided", match: order, id: `e3-${order}` });
    expect(third.answer.buffered).toBe(true);

    const event = (eventId: string, receivedAt: string, state: string, duplicates = 0) => ({
      eventId,
      receivedAt,
      source: null,
      duplicates,
      state,
    });
    const traceA = await traceAt(h, a.id);
    const confirmA = stepOf(traceA, "confirm");
    expect(confirmA.state).toBe("COMPLETED");
    expect(confirmA.wait?.events).toEqual([
      event(`e3-${order}`, third.answer.receivedAt, "buffered"),
      event(`e2-${order}`, second.answer.receivedAt, "taken-elsewhere"),
      event(`e1-${order}`, first.answer.receivedAt, "taken", 1),
      event(`old-${order}`, old.answer.receivedAt, "expired"),
    ]);
    // The event it took is its output (id, received, data).
    expect(confirmA.output).toMatchObject({ id: `e1-${order}`, receivedAt: first.answer.receivedAt, data: { decision: "approve" } });
    expect(stepOf(await traceAt(h, b.id), "confirm").wait?.events.map((e) => [e.eventId, e.state])).toEqual([
      [`e3-${order}`, "buffered"],
      [`e2-${order}`, "taken"],
      [`e1-${order}`, "taken-elsewhere"],
      [`old-${order}`, "expired"],
    ]);
    // A day on, the unclaimed one's buffer ended too.
    h.clock.t += DAY;
    expect(stepOf(await traceAt(h, a.id), "confirm").wait?.events[0]).toMatchObject({ eventId: `e3-${order}`, state: "expired" });
  });

  it("a timed-out wait: timedOut, the step failed (onTimeout fail) or completed with null (continue)", async () => {
    const h = harness();
    const failing = await parkedWait(h, unique("C"), { timeout: "10m" });
    const registeredAt = h.clock.now();
    await h.drain();
    expect(await executionStatus(failing.id)).toBe("FAILED");
    const failed = stepOf(await traceAt(h, failing.id), "confirm");
    expect(failed.state).toBe("FAILED");
    expect(failed.parkedUntil).toBeNull();
    expect(failed.wait).toMatchObject({ timedOut: true, registeredAt: iso(registeredAt), timeoutAt: iso(registeredAt + 10 * 60_000) });
    expect(failed.attempts.map((a) => a.outcome)).toEqual(["slept", "failed"]);

    const continuing = await parkedWait(h, unique("D"), { timeout: "10m", onTimeout: "continue" });
    await h.drain();
    const completed = stepOf(await traceAt(h, continuing.id), "confirm");
    expect(completed).toMatchObject({ state: "COMPLETED", output: null, wait: { timedOut: true, events: [] } });
  });

  it("lists at most the newest 20 events of a wait", async () => {
    const h = harness();
    const order = unique("E");
    const { id } = await parkedWait(h, order, { consume: "all" });
    const sent: string[] = [];
    for (let i = 0; i < TRACE_WAIT_EVENTS_MAX + 5; i++) {
      h.clock.t += 1_000;
      sent.push((await send(h, { name: "refund.decided", match: order, id: `many-${i}-${order}` })).answer.eventId);
    }
    const events = stepOf(await traceAt(h, id), "confirm").wait!.events;
    expect(events.map((e) => e.eventId)).toEqual(sent.slice(-TRACE_WAIT_EVENTS_MAX).reverse());
    expect(events.at(-1)!.state).toBe("buffered");
    expect(events.filter((e) => e.state === "taken")).toHaveLength(0); // the first one, taken, is past the 20 newest
  });

  it("GET /v1/executions/{id} answers the wait", async () => {
    const h = harness();
    const order = unique("F");
    const { id } = await parkedWait(h, order, { decisions: ["approve"] });
    const res = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(res.status).toBe(200);
    const trace = (await res.json()) as Trace;
    expect(stepOf(trace, "confirm").wait).toMatchObject({ event: "refund.decided", match: order, decisions: ["approve"] });
  });
});

describe("workflows/refund-approval.json", () => {
  it("waits for a decision with approve / reject offered; the decision routes it; no decision in an hour escalates", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, JSON.parse(refundApproval) as WorkflowDefinitionInput);
    const outcomes: Record<string, string> = {};
    for (const decision of ["approve", "reject", null]) {
      const refund = unique("RF");
      const id = await h.start(wf, { refund: { id: refund, amount: 25 } });
      await h.deliver(h.queue.take().map((m) => m.body));
      const waiting = stepOf(await traceAt(h, id), "decision");
      expect(waiting.wait).toMatchObject({ event: "refund.decided", match: refund, decisions: ["approve", "reject"] });
      if (decision) {
        // What the inspector's button sends.
        const { answer } = await send(h, { name: "refund.decided", match: refund, id: `inspector-${refund}`, data: { decision } });
        expect(answer.resumed).toEqual([id]);
      }
      await h.drain();
      expect(await executionStatus(id)).toBe("COMPLETED");
      const trace = await traceAt(h, id);
      outcomes[String(decision)] = trace.steps
        .filter((s) => s.state === "COMPLETED" && !["requested", "decision"].includes(s.vertexId))
        .map((s) => s.vertexId)
        .join();
      if (decision) expect(stepOf(trace, "decision").wait?.events.map((e) => e.state)).toEqual(["taken"]);
      else expect(stepOf(trace, "decision").wait?.timedOut).toBe(true);
    }
    expect(outcomes).toEqual({ approve: "refund", reject: "decline", null: "escalate" });
  });
});

describe("the archive's set read", () => {
  it("gives the same wait as the trace, in its one batch", async () => {
    const h = harness();
    const order = unique("G");
    const waitingOne = await parkedWait(h, order, { decisions: ["approve", "reject"] });
    await send(h, { name: "refund.decided", match: order, id: `g1-${order}`, data: { decision: "reject" } });
    await h.drain();
    const other = await parkedWait(h, order);
    const notRegistered = await h.start(await seedWorkflow(WS, waiting()), { order });
    const ids = [waitingOne.id, other.id, notRegistered];
    const counted = countingD1(env.DB);
    const set = await readTraceRecordsForSet(
      counted.db,
      ids.map((id) => ({ id, workspace: WS })),
    );
    expect(counted.roundTrips()).toBe(1);
    expect(counted.statements()).toBe(TRACE_SET_QUERIES);
    for (const id of ids) {
      const archived = buildTrace(set.get(id)!, h.clock.now());
      expect(archived).toEqual(await traceAt(h, id));
    }
    const waitOf = (id: string) => stepOf(buildTrace(set.get(id)!, h.clock.now()), "confirm").wait;
    expect(waitOf(waitingOne.id)?.events.map((e) => e.state)).toEqual(["taken"]);
    expect(waitOf(other.id)?.events.map((e) => e.state)).toEqual(["taken-elsewhere"]);
    expect(waitOf(notRegistered)).toMatchObject({ match: null, events: [] });
    // Another workspace reads nothing.
    expect((await readTraceRecordsForSet(env.DB, [{ id: waitingOne.id, workspace: "other" }])).size).toBe(0);
    // The archive's estimate leaves room for a wait's events.
    const sizes = await readTraceSizes(
      env.DB,
      ids.map((id) => ({ id, workspace: WS })),
    );
    expect(sizes.get(waitingOne.id)!).toBeGreaterThan(sizes.get(notRegistered)!);
  });
});

describe("the trace's query plans", () => {
  it("no statement of the trace's read or the archive's size estimate scans a growing table", async () => {
    const counted = countingD1(env.DB);
    await readTraceRecordsForSet(counted.db, [{ id: "x", workspace: WS }]);
    await readTraceSizes(counted.db, [{ id: "x", workspace: WS }]);
    const statements = counted.calls.flatMap((c) => c.sql);
    expect(statements).toHaveLength(TRACE_SET_QUERIES + 1);
    for (const sql of statements) {
      const plan = await planOf(sql);
      expect(scansOf(plan, GROWING_TABLES), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
    // The events of a wait: a range of `events_match`, per wait.
    const waits = statements.find((sql) => sql.includes("FROM event_waits w"))!;
    expect((await planOf(waits)).some((line) => /SEARCH b USING COVERING INDEX events_match/.test(line))).toBe(true);
  });
});
