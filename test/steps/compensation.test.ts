/**
 * Compensation at run time (SPEC section 18, issue 45, docs/steps.md "Compensation"), on real D1
 * through the harness: charge → ship, ship fails for good, the charge is refunded once with its
 * own key; the decision made once, after every step settled; undo steps one at a time in reverse
 * order of completion; a lost refund response retried with the same key (one refund at the
 * destination); an undo failed for good; the operator's retry and cancel answering 409; the
 * compensated step's key burnt.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { cancelExecution, retryFailedStep, retryFailedUndo } from "../../src/ledger";
import { sendUndoMessages } from "../../src/steps/compensate";
import { reap } from "../../src/steps/reaper";
import { callApp, DEST, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "dev";

const refund = (prefix: string, path = "/payments/refunds") => ({
  method: "POST",
  url: `${DEST}${path}`,
  headers: { "Idempotency-Key": `= '${prefix}-' & payload.order.id` },
  body: "= { 'charge': output.body.id, 'order': payload.order.id }",
  retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
});

const gateway = (id: string, path: string, compensate: Record<string, unknown> | null) => ({
  id,
  type: "GATEWAY",
  config: {
    method: "POST",
    url: `${DEST}${path}`,
    headers: { "Idempotency-Key": `= '${id}-' & payload.order.id` },
    body: "= { 'order': payload.order.id }",
    retry: { maxAttempts: 2, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
    ...(compensate ? { compensate } : {}),
  },
});

/** entry → charge (refunded) → reserve (released: optional) → ship; or charge and ship side by side (`parallel`). */
function order(o: { reserve?: boolean; parallel?: boolean } = {}): WorkflowDefinitionInput {
  const vertices: unknown[] = [
    { id: "received", type: "ENTRY_POINT", config: {} },
    gateway("charge", "/payments/charges", refund("refund")),
    gateway("ship", "/shipping/labels", null),
  ];
  const edges = o.parallel
    ? [
        { from: "received", to: "charge" },
        { from: "received", to: "ship" },
      ]
    : [
        { from: "received", to: "charge" },
        { from: o.reserve ? "reserve" : "charge", to: "ship" },
      ];
  if (o.reserve) {
    vertices.push(gateway("reserve", "/payments/charges", refund("release")));
    edges.push({ from: "charge", to: "reserve" });
  }
  return { id: unique("wf"), vertices, edges } as unknown as WorkflowDefinitionInput;
}

const payload = () => ({ order: { id: unique("O") } });

interface UndoRow {
  row_key: string;
  vertex_id: string;
  item_index: number;
  state: string;
  attempt: number;
  idempotency_key: string | null;
  error: string | null;
}

const undosOf = async (id: string) =>
  (
    await env.DB.prepare(
      `SELECT row_key, vertex_id, item_index, state, attempt, idempotency_key, error FROM work_items
       WHERE execution_id = ?1 AND kind = 'undo' ORDER BY item_index`,
    )
      .bind(id)
      .all<UndoRow>()
  ).results;

const refunds = (h: Harness) => h.dest.effects.filter((e) => e.path === "/payments/refunds");

describe("compensation", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it("ship fails for good: the charge is refunded once, with its own key and the charge's id; the execution COMPENSATED", async () => {
    const wf = await seedWorkflow(WS, order());
    const p = payload();
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("COMPLETED");
    expect(steps.ship!.state).toBe("FAILED");
    const undos = await undosOf(id);
    expect(undos).toEqual([
      expect.objectContaining({
        row_key: "charge#undo#0",
        vertex_id: "charge",
        state: "COMPLETED",
        attempt: 1,
        idempotency_key: `refund-${p.order.id}`,
      }),
    ]);
    const chargeId = (JSON.parse(steps.charge!.output!) as { body: { id: string } }).body.id;
    expect(refunds(h)).toEqual([{ path: "/payments/refunds", key: `refund-${p.order.id}`, body: { charge: chargeId, order: p.order.id } }]);
    // The undone key is burnt: on record with the undo's key.
    const burnt = await env.DB.prepare("SELECT idempotency_key, undo_key FROM burnt_keys WHERE execution_id = ?1").bind(id).all();
    expect(burnt.results).toEqual([{ idempotency_key: `charge-${p.order.id}`, undo_key: `refund-${p.order.id}` }]);
    // The undo's attempt is on record under its row key.
    const attempts = await env.DB.prepare(
      "SELECT vertex_id, outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id LIKE '%#undo#%'",
    )
      .bind(id)
      .all();
    expect(attempts.results).toEqual([{ vertex_id: "charge#undo#0", outcome: "completed" }]);
  });

  it("an undo whose key evaluates to the key its step sent fails before sending: COMPENSATION_FAILED, no refund", async () => {
    // Different expressions (the save-time check compares them), the same value at run time.
    const wf = order();
    const charge = (wf.vertices as unknown as Array<{ id: string; config: { compensate?: { headers: Record<string, string> } } }>).find(
      (v) => v.id === "charge",
    )!;
    charge.config.compensate!.headers = { "Idempotency-Key": "= 'charge-' & payload.order.ref" };
    const saved = await seedWorkflow(WS, wf);
    const p = payload();
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(saved, { order: { ...p.order, ref: p.order.id } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
    const [undo] = await undosOf(id);
    expect(undo).toMatchObject({ state: "FAILED", idempotency_key: null });
    expect(undo!.error).toContain(`is the key step charge sent`);
    expect(refunds(h)).toEqual([]);
  });

  it("nothing to compensate: a failure before any compensable step completed stays FAILED, nothing sent", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/payments/charges", 400);
    const id = await h.start(wf, payload());
    await h.drain();
    expect(await executionStatus(id)).toBe("FAILED");
    expect(await undosOf(id)).toEqual([]);
    expect(refunds(h)).toEqual([]);
  });

  it("two undo steps run one at a time, in reverse order of completion (release before refund)", async () => {
    const wf = await seedWorkflow(WS, order({ reserve: true }));
    const p = payload();
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect((await undosOf(id)).map((u) => [u.vertex_id, u.item_index, u.state])).toEqual([
      ["reserve", 0, "COMPLETED"],
      ["charge", 1, "COMPLETED"],
    ]);
    expect(refunds(h).map((e) => e.key)).toEqual([`release-${p.order.id}`, `refund-${p.order.id}`]);
  });

  it("a refund whose response is lost is retried with the same key: one refund at the destination", async () => {
    const wf = await seedWorkflow(WS, order());
    const p = payload();
    h.dest.fault("/shipping/labels", 400);
    h.dest.fault("/payments/refunds", 503, 1, { afterCommit: true });
    const id = await h.start(wf, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`refund-${p.order.id}`, `refund-${p.order.id}`]);
    expect(refunds(h)).toHaveLength(1);
    expect((await undosOf(id))[0]).toMatchObject({ state: "COMPLETED", attempt: 2 });
  });

  it("an undo that fails for good: COMPENSATION_FAILED, the undo after it never sent; the operator's retry answers 409", async () => {
    const wf = await seedWorkflow(WS, order({ reserve: true }));
    h.dest.fault("/shipping/labels", 400);
    h.dest.fault("/payments/refunds", 400);
    const id = await h.start(wf, payload());
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
    expect((await undosOf(id)).map((u) => [u.vertex_id, u.state])).toEqual([
      ["reserve", "FAILED"],
      ["charge", "PENDING"],
    ]);
    expect(refunds(h)).toEqual([]);
    const retried = await retryFailedStep(env.DB, WS, { executionId: id, vertexId: "ship" }, h.clock.now());
    expect(retried).toEqual({ retried: false, reason: "compensation", status: "COMPENSATION_FAILED" });
    const res = await callApp(h, "POST", `/v1/executions/${id}/steps/ship/retry`, { key: unique("k") });
    expect(res.status).toBe(409);
    expect(((await res.json()) as { code: string }).code).toBe("execution-compensation");
    // The operator retries the failed undo: the same key, the execution COMPENSATING again, then COMPENSATED.
    const failedKey = (await undosOf(id))[0]!.idempotency_key;
    expect(await retryFailedUndo(env.DB, WS, id, "charge", h.clock.now())).toMatchObject({
      retried: false,
      reason: "not-compensation-failed",
    });
    const again = await retryFailedUndo(env.DB, WS, id, "reserve", h.clock.now());
    expect(again).toEqual({ retried: true, undo: { executionId: id, vertexId: "reserve", place: 0 } });
    expect(await executionStatus(id)).toBe("COMPENSATING");
    if (again.retried) await sendUndoMessages(h.queue, [again.undo]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    const undos = await undosOf(id);
    expect(undos.map((u) => [u.vertex_id, u.state])).toEqual([
      ["reserve", "COMPLETED"],
      ["charge", "COMPLETED"],
    ]);
    expect(undos[0]!.idempotency_key).toBe(failedKey);
    expect(refunds(h).map((e) => e.key)).toEqual([failedKey, expect.stringMatching(/^refund-/)]);
  });

  it("the decision waits for every step: a branch still DISPATCHED when ship fails is charged first, then refunded", async () => {
    const wf = await seedWorkflow(WS, order({ parallel: true }));
    const p = payload();
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, p);
    // Ship runs first and fails for good while charge is still DISPATCHED: nothing is decided yet.
    const shipFirst = h.queue.pending.findIndex((m) => m.body.vertexId === "ship");
    const [ship] = h.queue.pending.splice(shipFirst, 1);
    await h.deliver([ship!.body]);
    expect(await executionStatus(id)).toBe("RUNNING");
    expect(await undosOf(id)).toEqual([]);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.effects.map((e) => e.path)).toEqual(["/payments/charges", "/payments/refunds"]);
  });

  it("two last settles at once decide once: one undo row, one undo message, one refund", async () => {
    const wf = await seedWorkflow(WS, order({ parallel: true }));
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, payload());
    const both = h.queue.take();
    await Promise.all(both.map((m) => h.deliver([m.body])));
    expect(h.queue.pending.filter((m) => m.body.undo !== undefined)).toHaveLength(1);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(await undosOf(id)).toHaveLength(1);
    expect(refunds(h)).toHaveLength(1);
  });

  it("an undo whose worker dies after the refund was sent: the reaper re-sends it after its lease, same key, one refund", async () => {
    let crashed = false;
    const crashing = harness({
      afterRun: (f) => {
        if (!crashed && f.vertexId.includes("#undo#")) {
          crashed = true;
          throw new Error("worker died after the undo's call");
        }
      },
    });
    const wf = await seedWorkflow(WS, order());
    const p = payload();
    crashing.dest.fault("/shipping/labels", 400);
    const id = await crashing.start(wf, p);
    while (!crashed) await crashing.drain(1);
    // The crashed delivery's retries are lost with the worker: only the reaper is left.
    crashing.queue.pending.splice(0);
    expect((await undosOf(id))[0]).toMatchObject({ state: "EXECUTING", idempotency_key: `refund-${p.order.id}` });
    crashing.clock.advance(crashing.rt.leaseMs + 1);
    await reap(crashing.rt);
    expect(crashing.queue.pending.map((m) => m.body)).toEqual([{ executionId: id, vertexId: "charge", undo: 0 }]);
    await crashing.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(crashing.dest.keysSent("/payments/refunds")).toEqual([`refund-${p.order.id}`, `refund-${p.order.id}`]);
    expect(crashing.dest.effects.filter((e) => e.path === "/payments/refunds")).toHaveLength(1);
  });

  it.each([
    ["a start over", {}],
    ["a new trigger, its first step's key computed by the start batch", { chain: true as const }],
  ])("a compensated key is burnt: a start over's charge fails before sending, saying why (%s)", async (_name, options) => {
    const wf = await seedWorkflow(WS, order());
    const p = payload();
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, p);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    const again = harness({}, options);
    // A start over (its first step queued), or a new trigger with the same business data whose first step's key
    // the start batch computes and inserts with the step (chaining).
    const startedId = "chain" in options ? await again.start(wf, p) : (await again.startOver(wf, p, id)).executionId;
    await again.drain();
    expect(again.dest.keysSent("/payments/charges")).toEqual([]);
    const steps = await stepsOf(startedId);
    expect(steps.charge).toMatchObject({ state: "FAILED", idempotency_key: null });
    expect(steps.charge!.error).toContain(`key charge-${p.order.id} was compensated`);
    expect(await executionStatus(startedId)).toBe("FAILED");
  });

  it("a cancel with `compensate: true` cancels what is in flight and undoes what completed; without it, a plain cancel", async () => {
    const wf = await seedWorkflow(WS, order());
    const p = payload();
    const id = await h.start(wf, p);
    // Charge runs and completes; ship is left DISPATCHED.
    const [charge] = h.queue.take();
    await h.deliver([charge!.body]);
    expect((await stepsOf(id)).ship!.state).toBe("DISPATCHED");
    h.queue.take();
    const res = await callApp(h, "POST", `/v1/executions/${id}/cancel`, { key: unique("k"), body: { compensate: true } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "COMPENSATING", cancelledSteps: [{ vertexId: "ship", state: "DISPATCHED" }] });
    expect((await stepsOf(id)).ship!.state).toBe("CANCELLED");
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(refunds(h).map((e) => e.key)).toEqual([`refund-${p.order.id}`]);

    const plain = await h.start(wf, payload());
    const [first] = h.queue.take();
    await h.deliver([first!.body]);
    h.queue.take();
    const cancelled = await callApp(h, "POST", `/v1/executions/${plain}/cancel`, { key: unique("k"), body: {} });
    expect(await cancelled.json()).toMatchObject({ status: "CANCELLED" });
    expect(await undosOf(plain)).toEqual([]);
  });

  it("COMPENSATING is live: cancel answers 409, the step's retry 409, a start over 409", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/shipping/labels", 400);
    const p = payload();
    const id = await h.start(wf, p);
    // Run until the decision: the undo's message is pending, not delivered.
    while (!h.queue.pending.some((m) => m.body.undo !== undefined)) {
      const [next] = h.queue.pending.sort((a, b) => a.dueAt - b.dueAt).splice(0, 1);
      if (next!.dueAt > h.clock.now()) h.clock.t = next!.dueAt;
      const result = await h.deliver([next!.body]);
      for (const d of result.retryDelays) h.queue.pending.push({ body: next!.body, dueAt: h.clock.now() + (d ?? 0) * 1000 });
    }
    expect(await executionStatus(id)).toBe("COMPENSATING");
    expect(await cancelExecution(env.DB, WS, id, h.clock.now())).toMatchObject({ cancelled: false, status: "COMPENSATING" });
    const cancel = await callApp(h, "POST", `/v1/executions/${id}/cancel`, { key: unique("k"), body: {} });
    expect(cancel.status).toBe(409);
    expect(await retryFailedStep(env.DB, WS, { executionId: id, vertexId: "ship" }, h.clock.now())).toMatchObject({
      retried: false,
      reason: "compensation",
    });
    await expect(h.startOver(wf, p, id)).rejects.toThrow();
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
  });
});
