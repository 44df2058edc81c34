/**
 * The operator's actions on a failed compensation (docs/steps.md "Compensation", issue 45), through
 * the real app on real D1: `POST /v1/executions/{id}/compensation/retry` (the failed undo again,
 * the same key, one effect at the destination) and `/compensation/resolve` ("mark resolved" with a
 * note: COMPENSATED, the resolution on record, the undo steps never sent CANCELLED, the keys left
 * undone burnt); problem+json refusals; another workspace's execution 404; and a re-failure after
 * an operator retry notified again under a new webhook-id (migrations/0034).
 */
import { createExecutionContext, env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { DEMO_NOTIFICATION_SECRET } from "../../demo/src/notifications";
import { callApp, DEST, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "dev";

const undo = (prefix: string) => ({
  method: "POST",
  url: `${DEST}/payments/refunds`,
  headers: { "Idempotency-Key": `= '${prefix}-' & payload.order.id` },
  body: "= { 'charge': output.body.id }",
  retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
});

const gateway = (id: string, path: string, compensate: Record<string, unknown> | null) => ({
  id,
  type: "GATEWAY",
  config: {
    method: "POST",
    url: `${DEST}${path}`,
    headers: { "Idempotency-Key": `= '${id}-' & payload.order.id` },
    body: "= { 'order': payload.order.id }",
    retry: { maxAttempts: 1, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
    ...(compensate ? { compensate } : {}),
  },
});

/** received → charge (refunded) → reserve (released) → ship (fails for good). */
const order = (): WorkflowDefinitionInput =>
  ({
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      gateway("charge", "/payments/charges", undo("refund")),
      gateway("reserve", "/payments/charges", undo("release")),
      gateway("ship", "/shipping/labels", null),
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "charge", to: "reserve" },
      { from: "reserve", to: "ship" },
    ],
  }) as unknown as WorkflowDefinitionInput;

const undosOf = async (id: string) =>
  (
    await env.DB.prepare(
      "SELECT vertex_id, state, idempotency_key, error FROM work_items WHERE execution_id = ?1 AND kind = 'undo' ORDER BY item_index",
    )
      .bind(id)
      .all<{ vertex_id: string; state: string; idempotency_key: string | null; error: string | null }>()
  ).results;

/** An order whose ship fails for good and whose first undo (the release) fails for good too: COMPENSATION_FAILED. */
async function compensationFailed(h: Harness) {
  const wf = await seedWorkflow(WS, order());
  const p = { order: { id: unique("O") } };
  h.dest.fault("/shipping/labels", 400);
  h.dest.fault("/payments/refunds", 400);
  const id = await h.start(wf, p);
  const notificationMessages = await drainSteps(h);
  expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
  return { wf, p, id, notificationMessages };
}

/** Drain the step and undo messages; notification messages are left aside (their deliveries are not under test here). */
async function drainSteps(h: Harness): Promise<number[]> {
  const aside: number[] = [];
  const setAside = () => {
    const steps = h.queue.pending.filter((m) => (m.body as { type?: string }).type === undefined);
    for (const m of h.queue.pending) if (!steps.includes(m)) aside.push((m.body as unknown as { id: number }).id);
    h.queue.pending.splice(0, h.queue.pending.length, ...steps);
  };
  setAside();
  while (h.queue.pending.length > 0) {
    await h.drain(1);
    setAside();
  }
  return aside;
}

const rowIds = async (executionId: string) =>
  (
    await env.DB.prepare(
      "SELECT id FROM notification_outbox WHERE execution_id = ?1 AND event = 'execution.compensation_failed' ORDER BY id",
    )
      .bind(executionId)
      .all<{ id: number }>()
  ).results.map((r) => r.id);

const problem = async (res: Response) => {
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  return (await res.json()) as { code: string; detail: string };
};

describe("compensation: the operator's retry of a failed undo", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it("202: the failed undo again, same key, the execution COMPENSATING then COMPENSATED; a repeat of the key replays", async () => {
    const { p, id } = await compensationFailed(h);
    const key = unique("k");
    const res = await callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, { key });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({
      executionId: id,
      status: "COMPENSATING",
      undo: { vertexId: "reserve", place: 0, state: "DISPATCHED" },
    });
    expect(await executionStatus(id)).toBe("COMPENSATING");
    const again = await callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, { key });
    expect(again.status).toBe(202);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    await drainSteps(h);
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(h.dest.keysSent("/payments/refunds")).toEqual([`release-${p.order.id}`, `release-${p.order.id}`, `refund-${p.order.id}`]);
    expect(h.dest.effects.filter((e) => e.path === "/payments/refunds").map((e) => e.key)).toEqual([
      `release-${p.order.id}`,
      `refund-${p.order.id}`,
    ]);
    // Now COMPENSATED: a new retry is refused, nothing changed.
    const late = await callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, { key: unique("k") });
    expect(late.status).toBe(409);
    expect((await problem(late)).code).toBe("execution-not-compensation-failed");
  });

  it("refusals: 409 for an execution that is not COMPENSATION_FAILED, 404 in another workspace or unknown, 400 without a key", async () => {
    const { id } = await compensationFailed(h);
    const other = await callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, { key: unique("k"), token: "other-token" });
    expect(other.status).toBe(404);
    expect((await problem(other)).code).toBe("not-found");
    const resolveOther = await callApp(h, "POST", `/v1/executions/${id}/compensation/resolve`, {
      key: unique("k"),
      token: "other-token",
      body: { note: "x" },
    });
    expect(resolveOther.status).toBe(404);
    expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
    expect((await callApp(h, "POST", `/v1/executions/nope/compensation/retry`, { key: unique("k") })).status).toBe(404);
    expect((await callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, {})).status).toBe(400);

    // A plain FAILED execution (nothing to compensate): 409 for both actions.
    const plain = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [{ id: "received", type: "ENTRY_POINT", config: {} }, gateway("ship", "/shipping/labels", null)],
      edges: [{ from: "received", to: "ship" }],
    } as unknown as WorkflowDefinitionInput);
    h.dest.fault("/shipping/labels", 400);
    const failed = await h.start(plain, { order: { id: unique("O") } });
    await drainSteps(h);
    expect(await executionStatus(failed)).toBe("FAILED");
    for (const action of ["retry", "resolve"]) {
      const res = await callApp(h, "POST", `/v1/executions/${failed}/compensation/${action}`, { key: unique("k"), body: { note: "n" } });
      expect(res.status).toBe(409);
      const body = await problem(res);
      expect(body.code).toBe("execution-not-compensation-failed");
      expect(body.detail).toContain("is FAILED");
    }
  });

  it("409 live-execution-exists while another execution of the lineage is live; nothing changed", async () => {
    const { wf, p, id } = await compensationFailed(h);
    // A start over of the COMPENSATION_FAILED execution runs (live) in its lineage: the retry waits for it.
    const over = await h.startOver(wf, p, id);
    const res = await callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, { key: unique("k") });
    expect(res.status).toBe(409);
    const body = await problem(res);
    expect(body.code).toBe("live-execution-exists");
    expect(body.detail).toContain(over.executionId);
    expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
    expect((await undosOf(id)).map((u) => u.state)).toEqual(["FAILED", "PENDING"]);
  });
});

describe("compensation: mark resolved", () => {
  let h: Harness;
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
    h = harness();
  });
  afterEach(() => vi.restoreAllMocks());

  it("200: COMPENSATED with the note on record, the undo never sent CANCELLED, the keys left undone burnt; then 409", async () => {
    const { wf, p, id } = await compensationFailed(h);
    const res = await callApp(h, "POST", `/v1/executions/${id}/compensation/resolve`, {
      key: unique("k"),
      body: { note: "refunded by hand, ticket 123", resolvedBy: "alice" },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toMatchObject({
      executionId: id,
      status: "COMPENSATED",
      resolvedBy: "alice",
      note: "refunded by hand, ticket 123",
      failedUndo: "reserve#undo#0",
      cancelledUndos: ["charge#undo#1"],
    });
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect((await undosOf(id)).map((u) => [u.vertex_id, u.state])).toEqual([
      ["reserve", "FAILED"],
      ["charge", "CANCELLED"],
    ]);
    const resolution = await env.DB.prepare("SELECT resolved_by, note, failed_undo FROM compensation_resolutions WHERE execution_id = ?1")
      .bind(id)
      .first();
    expect(resolution).toEqual({ resolved_by: "alice", note: "refunded by hand, ticket 123", failed_undo: "reserve#undo#0" });
    const event = await env.DB.prepare("SELECT vertex_id, detail FROM step_events WHERE execution_id = ?1 AND type = 'cancelled'")
      .bind(id)
      .first<{ vertex_id: string; detail: string }>();
    expect(event).toEqual({
      vertex_id: "charge#undo#1",
      detail: "not run: the compensation was marked resolved by alice: refunded by hand, ticket 123",
    });
    // Nothing more was sent: the refund never went out.
    expect(h.dest.effects.filter((e) => e.path === "/payments/refunds")).toEqual([]);
    expect(h.queue.pending.filter((m) => m.body.undo !== undefined)).toEqual([]);
    // The keys are burnt: a start over's charge fails before sending, saying an operator resolved it.
    const again = harness();
    const started = await again.startOver(wf, p, id);
    await drainSteps(again);
    expect(again.dest.keysSent("/payments/charges")).toEqual([]);
    const charge = (await stepsOf(started.executionId)).charge!;
    expect(charge.state).toBe("FAILED");
    expect(charge.error).toContain(`key charge-${p.order.id} was compensated`);
    expect(charge.error).toContain('an operator (alice) marked its failed compensation resolved ("refunded by hand, ticket 123")');
    // Resolved once: a second resolve, or a retry, is 409.
    for (const action of ["resolve", "retry"]) {
      const late = await callApp(h, "POST", `/v1/executions/${id}/compensation/${action}`, { key: unique("k"), body: { note: "again" } });
      expect(late.status).toBe(409);
      expect((await problem(late)).code).toBe("execution-not-compensation-failed");
    }
  });

  it("400 invalid-resolve-body without a note, with an empty or too long note, or an unknown member; nothing changed", async () => {
    const { id } = await compensationFailed(h);
    for (const body of [undefined, {}, { note: "" }, { note: "x".repeat(2001) }, { note: 3 }, { note: "n", by: "me" }]) {
      const res = await callApp(h, "POST", `/v1/executions/${id}/compensation/resolve`, { key: unique("k"), body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const p = await problem(res);
      expect(p.code).toBe("invalid-resolve-body");
    }
    expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
  });

  it("a resolve racing a retry: one wins, the other answers 409", async () => {
    const { id } = await compensationFailed(h);
    const [retry, resolve] = await Promise.all([
      callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, { key: unique("k") }),
      callApp(h, "POST", `/v1/executions/${id}/compensation/resolve`, { key: unique("k"), body: { note: "by hand" } }),
    ]);
    const won = retry.status === 202 ? "retry" : "resolve";
    expect(won === "retry" ? resolve.status : retry.status).toBe(409);
    if (won === "resolve") expect(resolve.status).toBe(200);
    expect(await executionStatus(id)).toBe(won === "retry" ? "COMPENSATING" : "COMPENSATED");
  });
});

describe("compensation: a re-failure after an operator retry notifies again", () => {
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
  });
  afterEach(() => vi.restoreAllMocks());

  const call = async (method: string, path: string, body: unknown) =>
    app.fetch(
      new Request(`http://idemflow.test${path}`, {
        method,
        headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
      env,
      createExecutionContext(),
    );

  it("one execution.compensation_failed per failure: the first webhook-id the execution's, the next the retry's generation", async () => {
    expect((await call("PUT", "/v1/secrets/NOTIFY", { value: DEMO_NOTIFICATION_SECRET })).status).toBe(200);
    const put = await call("PUT", "/v1/notifications", {
      url: `${DEST}/notifications`,
      secret: "NOTIFY",
      events: ["execution.compensation_failed"],
    });
    expect(put.status, await put.clone().text()).toBe(200);
    const h = harness();
    const { id, notificationMessages } = await compensationFailed(h);
    // The settle that failed the execution sent the row's message at once.
    expect(notificationMessages).toEqual([(await rowIds(id))[0]]);
    const rows = async () =>
      (
        await env.DB.prepare(
          `SELECT webhook_id, json_extract(data, '$.vertexId') AS vertexId FROM notification_outbox
           WHERE execution_id = ?1 AND event = 'execution.compensation_failed' ORDER BY id`,
        )
          .bind(id)
          .all<{ webhook_id: string; vertexId: string }>()
      ).results;
    expect(await rows()).toEqual([{ webhook_id: `idemflow.execution.compensation_failed.${id}`, vertexId: "reserve" }]);
    // The operator retries; the release fails again: a second notification, its own webhook-id.
    h.dest.fault("/payments/refunds", 400);
    expect((await callApp(h, "POST", `/v1/executions/${id}/compensation/retry`, { key: unique("k") })).status).toBe(202);
    // Its message sent at once (beside the first row's again: still pending, its deliveries set aside here).
    expect(await drainSteps(h)).toContain((await rowIds(id))[1]);
    expect(await executionStatus(id)).toBe("COMPENSATION_FAILED");
    expect(await rows()).toEqual([
      { webhook_id: `idemflow.execution.compensation_failed.${id}`, vertexId: "reserve" },
      { webhook_id: `idemflow.execution.compensation_failed.${id}/operator-retry-1`, vertexId: "reserve" },
    ]);
  });
});
