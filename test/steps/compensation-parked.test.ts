/**
 * Compensation and parked steps (issue 45 "Parked steps", docs/steps.md "Compensation";
 * migrations/0034 `steps_failure_cancels_parked`): when a step fails for good in an execution with
 * something to compensate, its DELAY and WAIT_FOR_EVENT steps still waiting are cancelled in the
 * settle's own statement — they never called anything — so the compensation starts without waiting
 * for them to wake; a step mid-call still holds the decision until it settles.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { DEST, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "dev";
const HOUR = 3_600_000;

const gateway = (id: string, path: string, compensate = false) => ({
  id,
  type: "GATEWAY",
  config: {
    method: "POST",
    url: `${DEST}${path}`,
    headers: { "Idempotency-Key": `= '${id}-' & payload.order.id` },
    body: "= { 'order': payload.order.id }",
    retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
    ...(compensate
      ? {
          compensate: {
            method: "POST",
            url: `${DEST}/payments/refunds`,
            headers: { "Idempotency-Key": "= 'refund-' & payload.order.id" },
            body: "= { 'charge': output.body.id }",
          },
        }
      : {}),
  },
});

/** received → charge (refunded) → ship (fails) ‖ nap (DELAY 1 h) → after ‖ confirm (WAIT_FOR_EVENT) [‖ label, a second call]. */
function order(o: { label?: boolean; compensate?: boolean } = {}): WorkflowDefinitionInput {
  const vertices: unknown[] = [
    { id: "received", type: "ENTRY_POINT", config: {} },
    gateway("charge", "/payments/charges", o.compensate !== false),
    gateway("ship", "/shipping/labels"),
    { id: "nap", type: "DELAY", config: { for: "1h" } },
    gateway("after", "/echo"),
    { id: "confirm", type: "WAIT_FOR_EVENT", config: { event: "payment.confirmed", match: "= payload.order.id", timeout: "3d" } },
  ];
  const edges = [
    { from: "received", to: "charge" },
    { from: "charge", to: "ship" },
    { from: "charge", to: "nap" },
    { from: "nap", to: "after" },
    { from: "charge", to: "confirm" },
  ];
  if (o.label) {
    vertices.push(gateway("label", "/payments/charges"));
    edges.push({ from: "charge", to: "label" });
  }
  return { id: unique("wf"), vertices, edges } as unknown as WorkflowDefinitionInput;
}

/** Deliver the pending message of `vertexId` (taken out of the queue). */
async function deliverOne(h: Harness, vertexId: string) {
  const i = h.queue.pending.findIndex((m) => m.body.vertexId === vertexId && m.body.undo === undefined);
  expect(i, `a pending message for ${vertexId}`).toBeGreaterThanOrEqual(0);
  const [m] = h.queue.pending.splice(i, 1);
  return h.deliver([m!.body]);
}

const row = (id: string, vertexId: string) =>
  env.DB.prepare("SELECT state, parked_until, error FROM steps WHERE execution_id = ?1 AND vertex_id = ?2")
    .bind(id, vertexId)
    .first<{ state: string; parked_until: number | null; error: string | null }>();

const eventsOf = async (id: string, vertexId: string) =>
  (
    await env.DB.prepare("SELECT type, detail FROM step_events WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY id")
      .bind(id, vertexId)
      .all<{ type: string; detail: string }>()
  ).results;

describe("compensation and parked steps", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it("ship fails for good while a DELAY and a WAIT_FOR_EVENT are parked: both cancelled, the compensation starts at once", async () => {
    const wf = await seedWorkflow(WS, order());
    const p = { order: { id: unique("O") } };
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, p);
    await deliverOne(h, "charge");
    await deliverOne(h, "nap");
    await deliverOne(h, "confirm");
    expect((await row(id, "nap"))!.parked_until).toBeGreaterThan(h.clock.now() + HOUR - 1000);
    expect((await row(id, "confirm"))!.parked_until).not.toBeNull();
    const startedAt = h.clock.now();
    await deliverOne(h, "ship");
    // The settle of ship cancelled both waits and decided: the undo's message is pending, not the nap's wake.
    expect(await executionStatus(id)).toBe("COMPENSATING");
    for (const v of ["nap", "confirm"]) {
      const r = (await row(id, v))!;
      expect(r.state).toBe("CANCELLED");
      expect(r.error).toContain("cancelled for compensation");
      expect(await eventsOf(id, v)).toEqual([expect.objectContaining({ type: "cancelled", detail: expect.stringContaining("(parked)") })]);
    }
    const u = h.queue.pending.findIndex((m) => m.body.undo !== undefined);
    const [undo] = h.queue.pending.splice(u, 1);
    await h.deliver([undo!.body]);
    // Compensated well before the nap would have woken.
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.clock.now() - startedAt).toBeLessThan(HOUR);
    // The nap's and the wait's wake-ups, delivered later, are acked: nothing after the nap runs.
    await h.drain();
    expect(h.dest.effects.map((e) => e.path)).toEqual(["/payments/charges", "/payments/refunds"]);
    expect((await stepsOf(id)).after).toBeUndefined();
  });

  it("a DELAY not yet claimed (DISPATCHED) is cancelled too; its message, delivered later, is acked and runs nothing", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await deliverOne(h, "charge");
    await deliverOne(h, "ship");
    expect((await row(id, "nap"))!.state).toBe("CANCELLED");
    expect((await row(id, "confirm"))!.state).toBe("CANCELLED");
    expect(await executionStatus(id)).toBe("COMPENSATING");
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect((await stepsOf(id)).after).toBeUndefined();
  });

  it("a DELAY between its claim and its park is cancelled too: its attempt closed `cancelled`, its park fenced out", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await deliverOne(h, "charge");
    await deliverOne(h, "confirm");
    let release!: () => void;
    let reached!: () => void;
    const atPark = new Promise<void>((resolve) => (reached = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const i = h.queue.pending.findIndex((m) => m.body.vertexId === "nap");
    const [napMessage] = h.queue.pending.splice(i, 1);
    const napRun = h.deliver([napMessage!.body], {
      afterRun: async (f) => {
        if (f.vertexId !== "nap") return;
        reached();
        await gate;
      },
    });
    await atPark;
    expect(await row(id, "nap")).toMatchObject({ state: "EXECUTING", parked_until: null });
    await deliverOne(h, "ship");
    expect((await row(id, "nap"))!.state).toBe("CANCELLED");
    expect(await executionStatus(id)).toBe("COMPENSATING");
    const attempts = await env.DB.prepare("SELECT outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id = 'nap'")
      .bind(id)
      .all<{ outcome: string }>();
    expect(attempts.results).toEqual([{ outcome: "cancelled" }]);
    release();
    await napRun;
    // The park wrote nothing: fenced out (the cancel moved the epoch).
    expect(await row(id, "nap")).toMatchObject({ state: "CANCELLED", parked_until: null });
    expect((await eventsOf(id, "nap")).map((e) => e.type)).toEqual(["cancelled"]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
  });

  it("a wait decided after the failure (its predecessor completes later) is cancelled as it is inserted", async () => {
    // received → charge ‖ ship; charge → nap: ship fails while charge is in flight, then charge completes and decides nap.
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        gateway("charge", "/payments/charges", true),
        gateway("ship", "/shipping/labels"),
        { id: "nap", type: "DELAY", config: { for: "1h" } },
      ],
      edges: [
        { from: "received", to: "charge" },
        { from: "received", to: "ship" },
        { from: "charge", to: "nap" },
      ],
    } as unknown as WorkflowDefinitionInput);
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await deliverOne(h, "ship");
    expect(await executionStatus(id)).toBe("RUNNING");
    await deliverOne(h, "charge");
    // The settle of charge decided nap DISPATCHED and, in the same statement, cancelled it: the compensation starts.
    expect((await row(id, "nap"))!.state).toBe("CANCELLED");
    expect(await executionStatus(id)).toBe("COMPENSATING");
    expect(await eventsOf(id, "nap")).toEqual([expect.objectContaining({ type: "cancelled" })]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/refunds")).toHaveLength(1);
  });

  it("with chaining: a wait decided after the failure is not claimed inline — cancelled, the compensation starts", async () => {
    const chained = harness({}, { chain: true });
    // received → ship (chained first: it fails) ‖ charge; charge → nap, the chain's candidate once charge settles.
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        gateway("ship", "/shipping/labels"),
        gateway("charge", "/payments/charges", true),
        { id: "nap", type: "DELAY", config: { for: "1h" } },
      ],
      edges: [
        { from: "received", to: "ship" },
        { from: "received", to: "charge" },
        { from: "charge", to: "nap" },
      ],
    } as unknown as WorkflowDefinitionInput);
    chained.dest.fault("/shipping/labels", 400);
    const id = await chained.start(wf, { order: { id: unique("O") } });
    expect((await stepsOf(id)).ship!.state).toBe("FAILED");
    expect(await executionStatus(id)).toBe("RUNNING");
    await deliverOne(chained, "charge");
    expect((await row(id, "nap"))!.state).toBe("CANCELLED");
    expect(await executionStatus(id)).toBe("COMPENSATING");
    await chained.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
  });

  it("a step mid-call still holds the decision: the compensation starts once it settled, the parked DELAY cancelled at once", async () => {
    const wf = await seedWorkflow(WS, order({ label: true }));
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await deliverOne(h, "charge");
    await deliverOne(h, "nap");
    // label's call hangs until released: its worker is mid-call (EXECUTING, not parked).
    let release!: () => void;
    let called!: () => void;
    const inCall = new Promise<void>((resolve) => (called = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const i = h.queue.pending.findIndex((m) => m.body.vertexId === "label");
    const [labelMessage] = h.queue.pending.splice(i, 1);
    const labelRun = h.deliver([labelMessage!.body], {
      fetch: async (input, init) => {
        called();
        await gate;
        return h.dest.fetch(input, init);
      },
    });
    await inCall;
    await deliverOne(h, "ship");
    expect((await row(id, "nap"))!.state).toBe("CANCELLED");
    expect((await row(id, "label"))!.state).toBe("EXECUTING");
    expect(await executionStatus(id)).toBe("RUNNING");
    expect(h.queue.pending.filter((m) => m.body.undo !== undefined)).toEqual([]);
    release();
    await labelRun;
    expect(await executionStatus(id)).toBe("COMPENSATING");
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.effects.map((e) => e.path)).toEqual(["/payments/charges", "/payments/charges", "/payments/refunds"]);
  });

  it("nothing to compensate: a parked DELAY is left as it is (the execution fails once it wakes and ends its branch)", async () => {
    const wf = await seedWorkflow(WS, order({ compensate: false }));
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await deliverOne(h, "charge");
    await deliverOne(h, "nap");
    await deliverOne(h, "ship");
    expect((await row(id, "nap"))!.state).toBe("EXECUTING");
    expect(await executionStatus(id)).toBe("RUNNING");
  });
});
