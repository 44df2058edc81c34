/**
 * A compensation as the reads show it (issue 45, docs/steps.md "Compensation"): the undo steps in
 * the trace (`GET /v1/executions/{id}`: each step's `undo` with its state, place, attempts, key,
 * output or error; "not compensated" and why for a step without one; `compensation` at a glance),
 * in the archived trace, in the change stream (`GET …/events`: the undo's attempts name the step
 * they undo; the stream does not end while the execution is COMPENSATING) and in a stream run's
 * progress (`undo.*` events). Real D1 through the harness, the real app.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { archiverFor } from "../../src/history/archive";
import { openExecutionEvents } from "../../src/http/execution-events";
import { stepEvents, type StepProgress } from "../../src/ingress/watch";
import { readStreamProgress, readTraceRecordsForSet, readTraceSizes } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf } from "../helpers/query-plans";
import { sweepAt } from "../history/helpers";
import { callApp, DEST, executionStatus, harness, seedWorkflow, unique, type Harness } from "./helpers";

const WS = "dev";
const DAY = 86_400_000;

const refund = (prefix: string) => ({
  method: "POST",
  url: `${DEST}/payments/refunds`,
  headers: { "Idempotency-Key": `= '${prefix}-' & payload.order.id` },
  body: "= { 'charge': output.body.id, 'order': payload.order.id }",
  retry: { maxAttempts: 2, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
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

/** received → charge (refunded) → [reserve (released)] → note (no compensate) → ship. */
function order(o: { reserve?: boolean } = {}): WorkflowDefinitionInput {
  const vertices: unknown[] = [
    { id: "received", type: "ENTRY_POINT", config: {} },
    gateway("charge", "/payments/charges", refund("refund")),
    gateway("note", "/echo", null),
    gateway("ship", "/shipping/labels", null),
  ];
  const edges = [
    { from: "received", to: "charge" },
    { from: o.reserve ? "reserve" : "charge", to: "note" },
    { from: "note", to: "ship" },
  ];
  if (o.reserve) {
    vertices.push(gateway("reserve", "/payments/charges", refund("release")));
    edges.push({ from: "charge", to: "reserve" });
  }
  return { id: unique("wf"), vertices, edges } as unknown as WorkflowDefinitionInput;
}

interface UndoView {
  undoes: string;
  state: string;
  reason: string | null;
  rowKey: string | null;
  place: number | null;
  attempt: number;
  idempotencyKey: string | null;
  output: { status: number; body: unknown } | null;
  error: string | null;
  attempts: Array<{ attempt: number; outcome: string; idempotencyKey: string | null }>;
  events: Array<{ type: string }>;
}
interface TraceView {
  status: string;
  compensation: {
    order: string[];
    completed: number;
    failed: number;
    running: number;
    pending: number;
    cancelled: number;
    resolution?: { resolvedBy: string; note: string; resolvedAt: string | null; failedUndoOf: string | null } | null;
  } | null;
  steps: Array<{ vertexId: string; state: string; undo: UndoView | null }>;
  archived?: true;
}

const traceOf = async (h: Harness, id: string): Promise<TraceView> => {
  const response = await callApp(h, "GET", `/v1/executions/${id}`);
  expect(response.status).toBe(200);
  return (await response.json()) as TraceView;
};
const undoOf = (t: TraceView, vertexId: string) => t.steps.find((s) => s.vertexId === vertexId)!.undo;

/** The events of a finished stream as `[event, data]`. */
async function framesOf(response: Response): Promise<Array<[string, Record<string, unknown>]>> {
  const text = await response.text();
  const frames: Array<[string, Record<string, unknown>]> = [];
  for (const block of text.split("\n\n")) {
    const event = /^event: (.+)$/m.exec(block)?.[1];
    const data = /^data: (.+)$/m.exec(block)?.[1];
    if (event && data) frames.push([event, JSON.parse(data) as Record<string, unknown>]);
  }
  return frames;
}

describe("a compensation in the trace, the archive and the streams", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it("COMPENSATED: the charge's undo (its refund) with state, key, attempts, output; the others say why they are not undone", async () => {
    const wf = await seedWorkflow(WS, order());
    const orderId = unique("O");
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: orderId } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    const trace = await traceOf(h, id);
    expect(trace.compensation).toEqual({
      order: ["charge"],
      completed: 1,
      failed: 0,
      running: 0,
      pending: 0,
      cancelled: 0,
      resolution: null,
    });
    const charge = undoOf(trace, "charge")!;
    expect(charge).toMatchObject({
      undoes: "charge",
      state: "COMPLETED",
      reason: null,
      rowKey: "charge#undo#0",
      place: 0,
      attempt: 1,
      idempotencyKey: `refund-${orderId}`,
      error: null,
    });
    expect(charge.output?.status).toBe(201);
    expect(charge.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: "completed", idempotencyKey: `refund-${orderId}` })]);
    // A completed step without `compensate`, the failed step and the entry: not compensated, and why.
    expect(undoOf(trace, "note")).toMatchObject({ undoes: "note", state: "NOT_COMPENSATED", rowKey: null, place: null, attempts: [] });
    expect(undoOf(trace, "note")!.reason).toContain("declares no `compensate`");
    expect(undoOf(trace, "ship")).toMatchObject({ state: "NOT_COMPENSATED", reason: expect.stringContaining("did not complete (FAILED)") });
    expect(undoOf(trace, "received")!.state).toBe("NOT_COMPENSATED");
    // The undo's attempts are not mixed into the step's own.
    expect(trace.steps.find((s) => s.vertexId === "charge")).toMatchObject({ state: "COMPLETED", attempt: 1 });
  });

  it("COMPENSATION_FAILED: the failed undo with its error and attempts, the one after it PENDING (never sent)", async () => {
    const wf = await seedWorkflow(WS, order({ reserve: true }));
    h.dest.fault("/shipping/labels", 400);
    h.dest.fault("/payments/refunds", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
    const trace = await traceOf(h, id);
    expect(trace.compensation).toMatchObject({
      order: ["reserve", "charge"],
      completed: 0,
      failed: 1,
      running: 0,
      pending: 1,
      cancelled: 0,
    });
    const reserve = undoOf(trace, "reserve")!;
    expect(reserve).toMatchObject({ state: "FAILED", place: 0, rowKey: "reserve#undo#0" });
    expect(reserve.error).toBeTruthy();
    expect(reserve.attempts.at(-1)).toMatchObject({ outcome: "failed" });
    expect(undoOf(trace, "charge")).toMatchObject({ state: "PENDING", place: 1, attempt: 0, idempotencyKey: null, attempts: [] });
    expect(trace.compensation!.resolution).toBeNull();

    // Marked resolved by an operator: who, the note, when and whose undo had failed, in the trace.
    const resolved = await callApp(h, "POST", `/v1/executions/${id}/compensation/resolve`, {
      key: unique("k"),
      body: { note: "refunded by hand at the bank", resolvedBy: "ops-anna" },
    });
    expect(resolved.status, await resolved.clone().text()).toBe(200);
    const after = await traceOf(h, id);
    expect(after.status).toBe("COMPENSATED");
    expect(after.compensation).toMatchObject({
      cancelled: 1,
      resolution: { resolvedBy: "ops-anna", note: "refunded by hand at the bank", failedUndoOf: "reserve" },
    });
    expect(Date.parse(after.compensation!.resolution!.resolvedAt!)).toBeGreaterThan(0);
  });

  it("an execution that never compensated: no `compensation`, no `undo` on any step", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/payments/charges", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.drain();
    expect(await executionStatus(id)).toBe("FAILED");
    const trace = await traceOf(h, id);
    expect(trace.compensation).toBeNull();
    expect(trace.steps.map((s) => s.undo)).toEqual(trace.steps.map(() => null));
  });

  it("COMPENSATING: the undo in flight in the trace, the change stream goes on and names the undone step", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.drain(3); // charge, note, ship: the refund's message is queued, not delivered
    expect(await executionStatus(id)).toBe("COMPENSATING");
    const live = await traceOf(h, id);
    expect(live.compensation).toMatchObject({ order: ["charge"], running: 1, completed: 0 });
    expect(undoOf(live, "charge")).toMatchObject({ state: "DISPATCHED", place: 0 });

    // A stream run's poll sees the undo row (after the steps); a COMPENSATING execution's event stream
    // ends with its budget, never with `execution.finished`.
    const before = (await readStreamProgress(env.DB, WS, id, []))!;
    expect(before.status).toBe("COMPENSATING");
    expect(before.steps.at(-1)).toMatchObject({ vertexId: "charge#undo#0", state: "DISPATCHED" });
    const open = (await openExecutionEvents(env.DB, WS, id, [0, 0], { maxPolls: 1 }))!;
    const [liveFrames] = await Promise.all([framesOf(open.response), open.done]);
    expect(liveFrames.map(([e]) => e)).not.toContain("execution.finished");
    expect(liveFrames.at(-1)).toEqual(["stream.end", expect.objectContaining({ reason: "budget" })]);

    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    const after = (await readStreamProgress(env.DB, WS, id, []))!;
    const progress = (rows: typeof after.steps): StepProgress[] =>
      rows.map((r) => ({ ...r, output: r.outputJson === null ? null : (JSON.parse(r.outputJson) as unknown) }));
    const seen = new Map(progress(before.steps).map((s) => [s.vertexId, s]));
    const events = stepEvents(seen, progress(after.steps));
    expect(events.map((e) => e.event)).toEqual(["undo.started", "undo.completed"]);
    expect(events[1]!.data).toMatchObject({ vertexId: "charge", place: 0, rowKey: "charge#undo#0", attempt: 1 });

    const done = (await openExecutionEvents(env.DB, WS, id, [0, 0]))!;
    const [frames] = await Promise.all([framesOf(done.response), done.done]);
    const undoAttempts = frames.filter(([e, d]) => e === "attempt" && d.vertexId === "charge#undo#0");
    expect(undoAttempts.at(-1)![1]).toMatchObject({ outcome: "completed", undo: { of: "charge", place: 0 } });
    expect(frames.filter(([e, d]) => e === "attempt" && d.vertexId === "charge")[0]![1]).not.toHaveProperty("undo");
    expect(frames.at(-1)).toEqual(["execution.finished", { executionId: id, status: "COMPENSATED" }]);
  });

  it("the archived trace of a COMPENSATED execution keeps its undo steps", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPENSATED");
    const before = await traceOf(h, id);
    expect(undoOf(before, "charge")!.state).toBe("COMPLETED");
    const { report } = await sweepAt(h.clock.now() + 31 * DAY, { archive: archiverFor(env, env.DB) });
    expect(report.archiveFailed).toBe(0);
    expect((await env.DB.prepare("SELECT count(*) AS n FROM executions WHERE id = ?1").bind(id).first<{ n: number }>())!.n).toBe(0);
    const archived = await traceOf(h, id);
    expect(archived).toEqual({ ...before, archived: true });
    expect(undoOf(archived, "charge")).toMatchObject({ state: "COMPLETED", rowKey: "charge#undo#0" });
  });

  it("the trace's read of the undo steps and the archive's estimate of them search work_items by execution, never scan it", async () => {
    const counted = countingD1(env.DB);
    await readTraceRecordsForSet(counted.db, [{ id: "x", workspace: WS }]);
    await readTraceSizes(counted.db, [{ id: "x", workspace: WS }]);
    const touching = counted.calls.flatMap((c) => c.sql).filter((sql) => /FROM work_items/.test(sql));
    expect(touching.length).toBeGreaterThanOrEqual(2);
    for (const sql of touching) {
      const plan = await planOf(sql);
      expect(scansOf(plan, ["work_items", "executions"]), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
  });

  it("the archive's size estimate counts an execution's undo steps", async () => {
    const wf = await seedWorkflow(WS, order());
    h.dest.fault("/shipping/labels", 400);
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.drain();
    const counted = (await readTraceSizes(env.DB, [{ id, workspace: WS }])).get(id)!;
    await env.DB.prepare("DELETE FROM work_items WHERE execution_id = ?1 AND kind = 'undo'").bind(id).run();
    const without = (await readTraceSizes(env.DB, [{ id, workspace: WS }])).get(id)!;
    expect(counted).toBeGreaterThan(without);
  });
});
