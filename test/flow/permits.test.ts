/**
 * Flow control per destination (SPEC section 17, docs/connectors.md "Limits"): a connector's limits
 * hold under concurrent claims, a dead worker's permit returns with its step's lease, a 429 with
 * Retry-After pauses the whole scope, the longest waiter goes first, and waiting is not an attempt.
 * Real D1 (both shards: test/flow is in SHARD_1_FILES), the real consumer, the harness's clock,
 * queue and destination.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { getWorkflow } from "../../src/definitions/store";
import { readScopeState } from "../../src/ledger/connector-permits";
import { countingD1 } from "../helpers/counting-d1";
import { permitWaitLine } from "../../src/flow/permits";
import { charging } from "../connectors/helpers";
import { callApp, executionStatus, harness, type Harness } from "../steps/helpers";
import { attemptsOf, counters, eventTypes, inFlightMeter, limitedPayments, limitedWorkflow, putJson, stepRow, WS } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const order = (id: string) => ({ order: { id, total: 10 } });

/** The first message of each started execution (the harness's queue), delivered all at once: concurrent claims. */
async function deliverTogether(h: Harness): Promise<void> {
  const messages = h.queue.take();
  await Promise.all(messages.map((m) => h.deliver([m.body])));
}

/** The execution's queued message (left out of the queue; the others stay). */
function takeFirst(h: Harness, executionId: string) {
  const i = h.queue.pending.findIndex((m) => m.body.executionId === executionId);
  return h.queue.pending.splice(i, 1)[0]!;
}

/** A destination whose calls hang until `open()`. */
function holdCalls(h: Harness): { open: () => void } {
  let open!: () => void;
  h.dest.hold = new Promise<void>((resolve) => (open = resolve));
  return {
    open: () => {
      h.dest.hold = null;
      open();
    },
  };
}

describe("concurrency", () => {
  it("holds under concurrent claims: 6 executions, concurrency 2 — two calls in flight, four park without an attempt", async () => {
    const h = harness();
    const meter = inFlightMeter(h);
    const { name, wf } = await limitedWorkflow(h, { concurrency: 2 });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await h.start(wf, order(`C-${i}-${name}`)));
    const gate = holdCalls(h);
    const running = deliverTogether(h);
    // Let every claim reach its ask: the two granted hang at the destination.
    for (let i = 0; i < 50 && h.queue.pending.length < 4; i++) await new Promise((r) => setTimeout(r, 20));
    expect(meter.now()).toBe(2);
    expect(h.queue.pending).toHaveLength(4); // the four waiters' wake-ups
    const state = await readScopeState(env.DB, WS, name, h.clock.now());
    expect(state).toMatchObject({ concurrency: 2, inFlight: 2, waiting: 4 });
    // The same, live, on the API (its clock is the deployment's: the leases run 30 s from the harness's).
    const read = await callApp(h, "GET", `/v1/connectors/${name}/state`);
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ name, limited: true, concurrency: 2, rate: null, waiting: 4, pausedUntil: null });
    gate.open();
    await running;
    await h.drain();
    for (const id of ids) {
      expect(await executionStatus(id)).toBe("COMPLETED");
      expect(await attemptsOf(id)).toEqual([{ attempt: 1, outcome: "completed" }]);
      expect((await counters(id))?.max_attempt).toBe(1);
      // No takeover, no failed attempt, no stopped redelivery (a waiter a release woke early still has its
      // timed wake-up queued: arriving after the settle, it is acked and not counted — docs/connectors.md).
      expect(await eventTypes(id)).toEqual([]);
      expect((await counters(id))?.redeliveries_stopped).toBe(0);
    }
    expect(meter.max()).toBe(2);
    expect(h.dest.effects).toHaveLength(6);
  });
});

describe("saving limits", () => {
  it("refuses each bad member with a 422 and its pointer, and saves nothing", async () => {
    const h = harness();
    const cases: Array<[Record<string, unknown>, string, string | null]> = [
      [{ rate: "10/d" }, "/limits/rate", null],
      [{ rate: "0/s" }, "/limits/rate", "limits-rate-zero"],
      [{ rate: "10001/s" }, "/limits/rate", "limits-rate-too-high"],
      [{ rate: "600001/m" }, "/limits/rate", "limits-rate-too-high"],
      [{ concurrency: 0 }, "/limits/concurrency", null],
      [{ concurrency: 1001 }, "/limits/concurrency", null],
      [{ rate: "5/s", burst: 0 }, "/limits/burst", null],
      [{ rate: "5/s", burst: 51 }, "/limits/burst", "limits-burst-too-high"],
      [{ burst: 5 }, "/limits/burst", "limits-burst-without-rate"],
    ];
    for (const [limits, pointer, code] of cases) {
      const name = `bad-${Math.random().toString(36).slice(2, 8)}`;
      const refused = await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, limits));
      expect(refused.status, JSON.stringify(limits)).toBe(422);
      const errors = refused.body.errors as Array<{ pointer: string; code: string }>;
      expect(
        errors.map((e) => e.pointer),
        JSON.stringify(limits),
      ).toContain(pointer);
      if (code) expect(errors.map((e) => e.code)).toContain(code);
      expect((await callApp(h, "GET", `/v1/connectors/${name}`)).status).toBe(404);
      expect(await readScopeState(env.DB, WS, name, h.clock.now())).toBeNull();
    }
    // The edges are accepted: 10,000/s, a burst of 10 × N, 1,000 in flight.
    const name = `edge-${Math.random().toString(36).slice(2, 8)}`;
    const edge = await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, { concurrency: 1000, rate: "10000/s", burst: 100000 }));
    expect(edge.status).toBe(201);
  });

  it("are operational: not in the saved workflow version, and an edit applies to it without a re-save", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { concurrency: 1 });
    expect(JSON.stringify(wf.definition)).not.toContain("limits");
    expect(await readScopeState(env.DB, WS, name, h.clock.now())).toMatchObject({ concurrency: 1, rate: null });
    expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, { concurrency: 3, rate: "2/s" }))).status).toBe(201);
    expect(await readScopeState(env.DB, WS, name, h.clock.now())).toMatchObject({
      concurrency: 3,
      rate: { count: 2, periodMs: 1000, burst: 2 },
    });
    expect((await getWorkflow(env.DB, WS, wf.definition.id))!.version).toBe(wf.version);
    expect(await (await callApp(h, "GET", `/v1/connectors/${name}/state`)).json()).toMatchObject({
      limited: true,
      concurrency: 3,
      rate: { count: 2, per: "s", burst: 2 },
      tokens: 2,
      heldBack: 0,
    });
    expect((await callApp(h, "GET", `/v1/connectors/${name}-absent/state`)).status).toBe(404);
    // Saved without limits: the scope's row goes, sends are unlimited.
    expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, undefined))).status).toBe(201);
    expect(await readScopeState(env.DB, WS, name, h.clock.now())).toBeNull();
    expect(await (await callApp(h, "GET", `/v1/connectors/${name}/state`)).json()).toMatchObject({ limited: false, inFlight: 0 });
    // An inline step (no connector) is never limited, and a connector without limits costs the grant's one read.
    const id = await h.start(wf, order(`U-${name}`));
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
  });
});

describe("waiting for a permit", () => {
  it("is not an attempt: a step that waits through 100 wake-ups then succeeds on attempt 1, nothing counted", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { rate: "1/h" });
    const first = await h.start(wf, order(`F-${name}`));
    await h.drain();
    expect(await executionStatus(first)).toBe("COMPLETED"); // took the bucket's one token
    const id = await h.start(wf, order(`W-${name}`));
    for (let wake = 0; wake <= 100; wake++) {
      const [message] = h.queue.take();
      expect(message, `wake-up ${wake}`).toBeDefined();
      if (message!.dueAt > h.clock.now()) h.clock.t = message!.dueAt;
      await h.deliver([message!.body]);
      const row = await stepRow(id);
      expect(row, `wake-up ${wake}`).toMatchObject({ state: "EXECUTING", attempt: 0, retry_base: 0 });
      expect(row!.parked_until).toBeGreaterThan(h.clock.now());
    }
    expect(await attemptsOf(id)).toEqual([]);
    expect(h.dest.effects).toHaveLength(1);
    // The edit applies at the next ask: a faster rate refills the bucket.
    expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, { rate: "100/s" }))).status).toBe(201);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await attemptsOf(id)).toEqual([{ attempt: 1, outcome: "completed" }]);
    expect(await counters(id)).toEqual({ max_attempt: 1, redeliveries_stopped: 0 });
    expect(await eventTypes(id)).toEqual([]); // no lease_expired, no attempt_failed, no redelivery_dropped
    const row = await stepRow(id);
    expect(row!.epoch).toBeGreaterThan(100);
    const wait = JSON.parse(row!.permit_wait!) as Parameters<typeof permitWaitLine>[0];
    expect(permitWaitLine(wait, h.clock.now())).toMatch(new RegExp(`^waited \\d+\\.\\d s for ${name}: no token left at 1/h`));
    expect((await readScopeState(env.DB, WS, name, h.clock.now()))!.heldBack).toBeGreaterThanOrEqual(101);
  });

  it("a dead worker's permit returns when its step's lease expires, not before", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { concurrency: 1 });
    const dead = await h.start(wf, order(`D-${name}`));
    const live = await h.start(wf, order(`L-${name}`));
    const [deadMessage, liveMessage] = h.queue.take();
    // The first worker hangs at the destination for good (a worker that died mid-call).
    let reached = false;
    void h.deliver([deadMessage!.body], { fetch: () => ((reached = true), new Promise<Response>(() => {})) });
    for (let i = 0; i < 100 && !reached; i++) await new Promise((r) => setTimeout(r, 10));
    expect(reached).toBe(true);
    await h.deliver([liveMessage!.body]);
    expect(await stepRow(live)).toMatchObject({ state: "EXECUTING", attempt: 0 });
    // Its wake-ups within the dead worker's lease (30 s) find the permit held.
    for (let i = 0; i < 3; i++) {
      const [wake] = h.queue.take();
      h.clock.t = wake!.dueAt;
      await h.deliver([wake!.body]);
      expect(await executionStatus(live)).toBe("RUNNING");
    }
    expect(h.clock.now()).toBeLessThan(1_900_000_030_000);
    h.clock.t = 1_900_000_030_000;
    await h.drain();
    expect(await executionStatus(live)).toBe("COMPLETED");
    expect(await attemptsOf(live)).toEqual([{ attempt: 1, outcome: "completed" }]);
    expect((await stepRow(dead))!.state).toBe("EXECUTING");
  });
});

describe("shared backpressure", () => {
  it("a 429 with Retry-After: 3 pauses every send of the scope for 3 s, and the trace says why", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { concurrency: 5 });
    const meter = inFlightMeter(h);
    h.dest.fault("/payments/charges", 429, 1, { headers: { "retry-after": "3" } });
    const hit = await h.start(wf, order(`H-${name}`));
    await h.deliver([h.queue.take()[0]!.body]);
    const pausedAt = h.clock.now();
    expect((await readScopeState(env.DB, WS, name, pausedAt))!).toMatchObject({
      pausedUntil: pausedAt + 3000,
      pauseReason: expect.stringMatching(/^paused by a 429 at /),
    });
    const other = await h.start(wf, order(`O-${name}`));
    h.clock.advance(200);
    await h.deliver([h.queue.pending.find((m) => m.body.executionId === other)!.body]);
    h.queue.pending = h.queue.pending.filter((m) => !(m.body.executionId === other && m.dueAt <= h.clock.now()));
    expect(await stepRow(other)).toMatchObject({ state: "EXECUTING", attempt: 0, parked_until: pausedAt + 3000 });
    const traced = async () => {
      const trace = (await (await callApp(h, "GET", `/v1/executions/${other}`)).json()) as {
        steps: Array<{ vertexId: string; attempts: unknown[]; permitWait: { text: string; grantedAt: string | null } | null }>;
      };
      return trace.steps.find((step) => step.vertexId === "charge")!;
    };
    const waiting = await traced();
    expect(waiting.attempts).toEqual([]);
    expect(waiting.permitWait).toMatchObject({
      grantedAt: null,
      text: expect.stringMatching(`^waiting for a permit of ${name} since [^:]+:[^:]+:[^ ]+: paused by a 429 at `),
    });
    await h.drain();
    expect((await traced()).permitWait!.text).toMatch(new RegExp(`^waited 3\\.0 s for ${name}: paused by a 429 at `));
    expect(await executionStatus(hit)).toBe("COMPLETED");
    expect(await executionStatus(other)).toBe("COMPLETED");
    // The destination's record: the 429, then nothing until the pause ended.
    expect(meter.starts[0]).toBe(pausedAt);
    expect(meter.starts.slice(1).every((t) => t >= pausedAt + 3000)).toBe(true);
    const wait = JSON.parse((await stepRow(other))!.permit_wait!) as Parameters<typeof permitWaitLine>[0];
    expect(permitWaitLine(wait, h.clock.now())).toMatch(new RegExp(`^waited 3\\.0 s for ${name}: paused by a 429 at `));
    expect(await attemptsOf(other)).toEqual([{ attempt: 1, outcome: "completed" }]);
  });
});

describe("a pause and the line", () => {
  it("during a pause only the line's head waits for its end; the rest sleep long and are woken by the releases", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { concurrency: 5 });
    h.dest.fault("/payments/charges", 429, 1, { headers: { "retry-after": "3" } });
    await h.start(wf, order(`P-${name}`));
    await h.deliver([h.queue.take()[0]!.body]);
    const pausedUntil = h.clock.now() + 3000;
    h.queue.take(); // the 429'd step's retry
    const head = await h.start(wf, order(`A-${name}`));
    await h.deliver([takeFirst(h, head).body]);
    h.clock.advance(10);
    const behind = await h.start(wf, order(`B-${name}`));
    await h.deliver([takeFirst(h, behind).body]);
    expect((await stepRow(head))!.parked_until).toBe(pausedUntil);
    expect((await stepRow(behind))!.parked_until! - h.clock.now()).toBeGreaterThanOrEqual(30_000);
    // The pause ends: the head's wake-up runs it, and its release wakes the one behind at once.
    const timers = h.queue.take();
    const headWake = timers.find((m) => m.body.executionId === head)!;
    h.clock.t = headWake.dueAt;
    await h.deliver([headWake.body]);
    expect(await executionStatus(head)).toBe("COMPLETED");
    const woken = h.queue.take();
    expect(woken.map((m) => m.body.executionId)).toEqual([behind]);
    await h.deliver([woken[0]!.body]);
    expect(await executionStatus(behind)).toBe("COMPLETED");
  });
});

describe("fairness", () => {
  it("the longest waiter goes first: a newcomer that arrives as the permit frees waits behind it", async () => {
    const h = harness();
    const meter = inFlightMeter(h);
    const { name, wf } = await limitedWorkflow(h, { concurrency: 1 });
    const holder = await h.start(wf, order(`H-${name}`));
    const gate = holdCalls(h);
    const holding = h.deliver([h.queue.take()[0]!.body]);
    for (let i = 0; i < 100 && meter.now() === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const waiter = await h.start(wf, order(`W-${name}`));
    await h.deliver([h.queue.take()[0]!.body]);
    expect(await stepRow(waiter)).toMatchObject({ attempt: 0 });
    h.clock.advance(500);
    h.queue.take(); // the waiter's timed wake-up: the release must wake it
    gate.open();
    await holding; // released: the oldest waiter is woken now, its message queued
    const woken = h.queue.take();
    expect(woken.map((m) => m.body.executionId)).toContain(waiter);
    // A newcomer's claim lands before the woken waiter's: it must not take the free permit.
    const newcomer = await h.start(wf, order(`N-${name}`));
    await h.deliver([h.queue.take().find((m) => m.body.executionId === newcomer)!.body]);
    expect(await stepRow(newcomer)).toMatchObject({ state: "EXECUTING", attempt: 0 });
    for (const m of woken) await h.deliver([m.body]);
    expect(await executionStatus(waiter)).toBe("COMPLETED");
    await h.drain();
    expect(await executionStatus(newcomer)).toBe("COMPLETED");
    const orders = h.dest.effects.map((e) => (e.body as { order: string }).order);
    expect(orders).toEqual([`H-${name}`, `W-${name}`, `N-${name}`]);
    expect(meter.max()).toBe(1);
    expect(holder).toBeDefined();
  });

  it("no starvation: with newcomers arriving all along, permits go in the order the steps first asked", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { concurrency: 1 });
    const holder = await h.start(wf, order(`H-${name}`));
    const gate = holdCalls(h);
    const holding = h.deliver([h.queue.take()[0]!.body]);
    for (let i = 0; i < 100 && h.dest.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const arrivals: string[] = [];
    for (let i = 0; i < 6; i++) {
      h.clock.advance(300);
      const id = await h.start(wf, order(`A${i}-${name}`));
      arrivals.push(`A${i}-${name}`);
      await h.deliver([takeFirst(h, id).body]);
    }
    gate.open();
    await holding;
    // Every wake-up — timed or a release's — in due order; newcomers keep coming while they run.
    for (let i = 6; i < 12; i++) {
      h.clock.advance(300);
      await h.start(wf, order(`A${i}-${name}`));
      arrivals.push(`A${i}-${name}`);
      await h.drain(5);
    }
    await h.drain(500);
    const orders = h.dest.effects.map((e) => (e.body as { order: string }).order);
    expect(orders).toEqual([`H-${name}`, ...arrivals]);
    expect(holder).toBeDefined();
  });
});

describe("the line wakes from its head", () => {
  it("a release wakes as many waiters as can go now, oldest first — not one per release", async () => {
    const h = harness();
    const meter = inFlightMeter(h);
    const { name, wf } = await limitedWorkflow(h, { concurrency: 1 });
    await h.start(wf, order(`H-${name}`));
    const gate = holdCalls(h);
    const holding = h.deliver([h.queue.take()[0]!.body]);
    for (let i = 0; i < 100 && meter.now() === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const waiters: string[] = [];
    for (let i = 0; i < 4; i++) {
      h.clock.advance(100);
      const id = await h.start(wf, order(`W${i}-${name}`));
      waiters.push(id);
      await h.deliver([takeFirst(h, id).body]);
      expect(await stepRow(id)).toMatchObject({ state: "EXECUTING", attempt: 0 });
    }
    // Behind the head, a waiter of a scope that caps concurrency sleeps long: the releases wake the line.
    const parked = await Promise.all(waiters.map(async (id) => (await stepRow(id))!.parked_until! - h.clock.now()));
    expect(parked[0]).toBeLessThanOrEqual(2000);
    for (const ms of parked.slice(1)) expect(ms).toBeGreaterThanOrEqual(20_000);
    h.queue.take(); // their timed wake-ups
    // Four slots now: the one release wakes all four waiters at once.
    expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, { concurrency: 4 }))).status).toBe(201);
    gate.open();
    await holding;
    const woken = h.queue.take();
    expect(woken.every((m) => m.dueAt <= h.clock.now())).toBe(true);
    expect(woken.map((m) => m.body.executionId).sort()).toEqual([...waiters].sort());
    await Promise.all(woken.map((m) => h.deliver([m.body])));
    for (const id of waiters) expect(await executionStatus(id)).toBe("COMPLETED");
    expect(meter.max()).toBeLessThanOrEqual(4);
    // Each waiter was refused once (its first ask), never on a wake-up.
    expect((await readScopeState(env.DB, WS, name, h.clock.now()))!.heldBack).toBe(4);
  });

  it("a token due within a second is waited for in the invocation: no park, no refused wake-up", async () => {
    const h = harness();
    const meter = inFlightMeter(h);
    const slept: number[] = [];
    h.rt.sleep = async (ms) => {
      slept.push(ms);
      h.clock.advance(ms);
    };
    const { name, wf } = await limitedWorkflow(h, { rate: "10/s", burst: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await h.start(wf, order(`S${i}-${name}`)));
    for (const m of h.queue.take()) await h.deliver([m.body]);
    for (const id of ids) {
      expect(await executionStatus(id)).toBe("COMPLETED");
      expect((await stepRow(id))!.permit_wait).toBeNull(); // never parked
      expect(await attemptsOf(id)).toEqual([{ attempt: 1, outcome: "completed" }]);
    }
    expect(h.queue.pending).toEqual([]); // no wake-up sent
    expect(slept).toEqual([100, 100]);
    expect(meter.starts[1]! - meter.starts[0]!).toBeGreaterThanOrEqual(100);
    expect(meter.starts[2]! - meter.starts[1]!).toBeGreaterThanOrEqual(100);
  });
});

describe("lost and early wake-ups", () => {
  it("a wake-up that arrives a little early is retried at its time, not acked (the waiter would sit until the cron)", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { rate: "1/h" });
    await h.start(wf, order(`E0-${name}`));
    await h.drain();
    const id = await h.start(wf, order(`E1-${name}`));
    await h.deliver([h.queue.take()[0]!.body]);
    const parkedUntil = (await stepRow(id))!.parked_until!;
    h.clock.t = parkedUntil - 400;
    const early = await h.deliver([h.queue.take()[0]!.body]);
    expect(early.explicitAcks).toEqual([]);
    expect(early.retryDelays).toEqual([1]);
  });

  it("a timed wake-up that arrives after a release woke the waiter and it ran is acked, not a stopped redelivery", async () => {
    const h = harness();
    const meter = inFlightMeter(h);
    const { name, wf } = await limitedWorkflow(h, { concurrency: 1 });
    await h.start(wf, order(`H-${name}`));
    const gate = holdCalls(h);
    const holding = h.deliver([h.queue.take()[0]!.body]);
    for (let i = 0; i < 100 && meter.now() === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const waiter = await h.start(wf, order(`W-${name}`));
    await h.deliver([h.queue.take()[0]!.body]);
    const [timed] = h.queue.take(); // its timed wake-up, held back for now
    expect(timed!.body).toMatchObject({ executionId: waiter, wake: "permit" });
    gate.open();
    await holding; // the release wakes it now
    await h.drain();
    expect(await executionStatus(waiter)).toBe("COMPLETED");
    h.clock.t = timed!.dueAt;
    const late = await h.deliver([timed!.body]);
    expect(late.explicitAcks).toHaveLength(1);
    expect(await counters(waiter)).toEqual({ max_attempt: 1, redeliveries_stopped: 0 });
    expect(await eventTypes(waiter)).toEqual([]);
    // A message without the mark (a real redelivery) is still counted.
    await h.deliver([{ executionId: waiter, vertexId: "charge" }]);
    expect((await counters(waiter))!.redeliveries_stopped).toBe(1);
  });

  it("a waiter whose wake-up was lost stops holding newer ones back, and a release revives it first", async () => {
    const h = harness();
    const { name, wf } = await limitedWorkflow(h, { concurrency: 1 });
    await h.start(wf, order(`H-${name}`));
    const gate = holdCalls(h);
    const holding = h.deliver([h.queue.take()[0]!.body]);
    for (let i = 0; i < 100 && h.dest.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const lost = await h.start(wf, order(`L-${name}`));
    await h.deliver([h.queue.take()[0]!.body]);
    h.queue.take(); // its wake-up is lost
    h.clock.advance(10_000);
    const newcomer = await h.start(wf, order(`N-${name}`));
    await h.deliver([takeFirst(h, newcomer).body]);
    // Refused for the slot (every permit is in flight), not behind the lost waiter.
    expect(JSON.parse((await stepRow(newcomer))!.permit_wait!).reason).toMatch(/^every permit is in flight/);
    gate.open();
    await holding; // the release wakes the oldest waiter: the lost one
    expect(h.queue.pending.map((m) => m.body.executionId)).toContain(lost);
    await h.drain();
    const orders = h.dest.effects.map((e) => (e.body as { order: string }).order);
    expect(orders).toEqual([`H-${name}`, `L-${name}`, `N-${name}`]);
  });
});

describe("where the permit is asked", () => {
  it("a chained first step (inserted claimed at the start) asks between that claim and its send; parks without an attempt", async () => {
    const h = harness({}, { chain: true });
    const { name, wf } = await limitedWorkflow(h, { rate: "1/h" });
    const first = await h.start(wf, order(`CF-${name}`)); // chained inline: takes the one token
    expect(await executionStatus(first)).toBe("COMPLETED");
    const second = await h.start(wf, order(`CS-${name}`)); // chained inline: no token, parks
    expect(await stepRow(second)).toMatchObject({ state: "EXECUTING", epoch: 1, attempt: 0 });
    expect(await attemptsOf(second)).toEqual([]);
    expect(h.dest.effects).toHaveLength(1);
    expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, { rate: "10/s" }))).status).toBe(201);
    await h.drain();
    expect(await executionStatus(second)).toBe("COMPLETED");
    expect(await attemptsOf(second)).toEqual([{ attempt: 1, outcome: "completed" }]);
    expect(await eventTypes(second)).toEqual([]);
  });

  it("a verify probe and its write share one permit: a re-attempt through a keyless connector asks once", async () => {
    const h = harness();
    const name = `verify-${Math.random().toString(36).slice(2, 8)}`;
    const connector = {
      name,
      baseUrl: "http://localhost:8788/legacy",
      headers: { "Content-Type": "application/json" },
      verify: { path: "/orders", query: { external_id: "= payload.order.id" }, condition: "= $count(body.items) > 0" },
      retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 },
      limits: { concurrency: 1 },
    };
    expect((await putJson(h, `/v1/connectors/${name}`, connector)).status).toBe(201);
    const wf = {
      id: `wf-${name}`,
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        {
          id: "charge",
          type: "GATEWAY",
          config: { connector: name, method: "POST", path: "/orders", body: "= { 'external_id': payload.order.id }" },
        },
      ],
      edges: [{ from: "received", to: "charge" }],
    };
    expect((await putJson(h, `/v1/workflows/${wf.id}`, wf)).status).toBe(201);
    const stored = (await getWorkflow(env.DB, WS, wf.id))!;
    const id = await h.start(stored, order(`V-${name}`));
    h.dest.fault("/legacy/orders", 503, 1);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    // Attempt 2 ran the probe (a GET) and the write under one permit: the scope saw no refusal.
    const methods = h.dest.requests.map((r) => r.method);
    expect(methods).toEqual(["POST", "GET", "POST"]);
    expect((await readScopeState(env.DB, WS, name, h.clock.now()))!.heldBack).toBe(0);
  });
});

describe("the cost of a permit", () => {
  // The ask and the release: two round trips more than through a connector without limits, which costs what an inline step does.
  it("a send through a limited connector costs the ask and the release; one without limits costs nothing more", async () => {
    const cost = async (limits: Record<string, unknown> | undefined) => {
      const counting = countingD1(env.DB);
      const h = harness({ db: counting.db });
      const name = `cost-${Math.random().toString(36).slice(2, 8)}`;
      expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, limits))).status).toBe(201);
      const wf = charging(name);
      expect((await putJson(h, `/v1/workflows/${wf.id}`, wf)).status).toBe(201);
      const id = await h.start((await getWorkflow(env.DB, WS, wf.id))!, order(`K-${name}`));
      const [message] = h.queue.take();
      counting.reset();
      await h.deliver([message!.body]);
      expect(await executionStatus(id)).toBe("COMPLETED");
      return { roundTrips: counting.calls.length, statements: counting.statements() };
    };
    const unlimited = await cost(undefined);
    const limited = await cost({ concurrency: 5, rate: "20/s" });
    console.info(`permit cost: unlimited ${JSON.stringify(unlimited)}, limited ${JSON.stringify(limited)}`);
    // No limits: the claim's batch read the workspace's limited connectors (a column of its run read), this
    // one is not among them — no ask, nothing released: claim, key, settle… as an inline step's.
    expect(unlimited.roundTrips).toBe(4);
    // Limits: the ask (3 statements) and the release (4: permit back, the line's head woken — a MAP's
    // item or a step, one statement each — and the sweep).
    expect(limited.roundTrips - unlimited.roundTrips).toBe(2);
    expect(limited.statements - unlimited.statements).toBe(7);
  });

  it("limits added to a connector that had none apply from the next claim, with no re-save", async () => {
    const h = harness();
    const name = `later-${Math.random().toString(36).slice(2, 8)}`;
    expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, undefined))).status).toBe(201);
    const wf = charging(name);
    expect((await putJson(h, `/v1/workflows/${wf.id}`, wf)).status).toBe(201);
    const stored = (await getWorkflow(env.DB, WS, wf.id))!;
    const free = await h.start(stored, order(`A-${name}`));
    await h.drain();
    expect(await executionStatus(free)).toBe("COMPLETED");
    expect((await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, { rate: "1/h" }))).status).toBe(201);
    const first = await h.start(stored, order(`B-${name}`));
    const second = await h.start(stored, order(`C-${name}`));
    for (const m of h.queue.take()) await h.deliver([m.body]);
    expect(await executionStatus(first)).toBe("COMPLETED"); // the bucket's one token
    expect(await stepRow(second)).toMatchObject({ state: "EXECUTING", attempt: 0 }); // parked for a permit
    expect(JSON.parse((await stepRow(second))!.permit_wait!).reason).toMatch(/^no token left at 1\/h/);
    expect(h.dest.effects).toHaveLength(2);
  });
});
