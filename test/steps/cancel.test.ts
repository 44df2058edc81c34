/**
 * Cancel, and never two live executions of one trigger (SPEC sections 4 and 9): the operator
 * routes against the real app, real D1 and the harness's queue and destination.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { getWorkflow } from "../../src/definitions/store";
import { redispatchExpiredLeases, redispatchOverdue, retryFailedStep } from "../../src/ledger";
import { callApp, chargeWorkflow, executionStatus, failedCharge, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "dev"; // dev-token's workspace

const cancel = (h: Harness, id: string, init: { key?: string; body?: unknown; token?: string } = {}) =>
  callApp(h, "POST", `/v1/executions/${id}/cancel`, { key: unique("op"), ...init });
const startOver = (h: Harness, id: string) => callApp(h, "POST", `/v1/executions/${id}/start-over`, { key: unique("op") });
const retry = (h: Harness, id: string, vertexId = "charge") =>
  callApp(h, "POST", `/v1/executions/${id}/steps/${vertexId}/retry`, { key: unique("op") });

async function eventsOf(id: string, type: string) {
  const { results } = await env.DB.prepare(
    "SELECT vertex_id, epoch, detail FROM step_events WHERE execution_id = ?1 AND type = ?2 ORDER BY id",
  )
    .bind(id, type)
    .all<{ vertex_id: string; epoch: number; detail: string }>();
  return results;
}

async function liveInLineage(id: string): Promise<number> {
  const row = await env.DB.prepare(
    "SELECT count(*) AS n FROM executions WHERE status = 'RUNNING' AND lineage_id = (SELECT lineage_id FROM executions WHERE id = ?1)",
  )
    .bind(id)
    .first<{ n: number }>();
  return row!.n;
}

async function completedCharge(h: Harness) {
  const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
  const id = await h.start(wf, { order: { id: unique("O"), total: 12 } });
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  return id;
}

async function failedExecution(h: Harness) {
  const { id } = await failedCharge(h, WS);
  expect(await executionStatus(id)).toBe("FAILED");
  return id;
}

describe("cancel", () => {
  it("cancels a step mid-call: the answer names it and its key, the worker's late settle is fenced out, nothing follows", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("C"), total: 9 } });
    const [first] = h.queue.take();
    let answer: Response | undefined;
    // The charge was sent; before its worker settles, the operator cancels.
    await h.deliver([first!.body], { afterRun: async () => void (answer = await cancel(h, id)) });
    expect(answer!.status).toBe(200);
    const key = (await stepsOf(id)).charge!.idempotency_key;
    expect(await answer!.json()).toEqual({
      executionId: id,
      status: "CANCELLED",
      cancelledSteps: [{ vertexId: "charge", state: "EXECUTING", idempotencyKey: key }],
      identityReleased: false,
    });
    expect(await executionStatus(id)).toBe("CANCELLED");
    const steps = await stepsOf(id);
    expect(steps.charge).toMatchObject({ state: "CANCELLED", epoch: 2, error: "cancelled by an operator" });
    expect(steps.done).toBeUndefined(); // the settle that would have dispatched it was fenced out
    expect(await eventsOf(id, "cancelled")).toEqual([
      { vertex_id: "charge", epoch: 2, detail: `cancelled while EXECUTING; key sent: ${key}` },
    ]);
    expect(await eventsOf(id, "fenced_out")).toHaveLength(1);
    // Its attempt closed as cancelled at the cancel; the fenced-out settle did not touch it.
    const attempts = await env.DB.prepare("SELECT epoch, outcome, response_status FROM step_attempts WHERE execution_id = ?1")
      .bind(id)
      .all();
    expect(attempts.results).toEqual([{ epoch: 1, outcome: "cancelled", response_status: null }]);
    expect(h.queue.pending).toEqual([]);
    // Nothing for the reaper: no expired lease, no overdue DISPATCHED step of this execution.
    const later = h.clock.now() + 86_400_000;
    const refs = [...(await redispatchExpiredLeases(env.DB, later, 100)), ...(await redispatchOverdue(env.DB, later, 60_000, 100))];
    expect(refs.filter((r) => r.executionId === id)).toEqual([]);
    expect(h.dest.effects).toHaveLength(1); // the one call already sent
  });

  it("cancels DISPATCHED steps at once; their queued message finds them cancelled and is acked, unsent", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("D"), total: 1 } });
    const response = await cancel(h, id);
    expect(await response.json()).toMatchObject({ cancelledSteps: [{ vertexId: "charge", state: "DISPATCHED", idempotencyKey: null }] });
    expect(await eventsOf(id, "cancelled")).toEqual([{ vertex_id: "charge", epoch: 1, detail: "cancelled while DISPATCHED; no key sent" }]);
    await h.drain();
    expect(h.dest.requests).toEqual([]);
    expect((await stepsOf(id)).charge!.state).toBe("CANCELLED");
  });

  it("a repeated request replays; a new cancel of a CANCELLED execution answers 200; COMPLETED and FAILED answer 409", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("R"), total: 1 } });
    const key = unique("op");
    const first = await cancel(h, id, { key });
    const again = await cancel(h, id, { key });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(await first.json());
    const fresh = await cancel(h, id);
    expect(fresh.status).toBe(200);
    expect(await fresh.json()).toEqual({ executionId: id, status: "CANCELLED", cancelledSteps: [], identityReleased: false });

    for (const finished of [await completedCharge(h), await failedExecution(h)]) {
      const refused = await cancel(h, finished);
      expect(refused.status).toBe(409);
      expect(await refused.json()).toMatchObject({ code: "execution-not-cancellable" });
    }
    expect((await cancel(h, id, { token: "other-token" })).status).toBe(404);
    const invalid = await cancel(h, id, { body: { releaseIdentity: "yes" } });
    expect(invalid.status).toBe(400);
    expect(await invalid.json()).toMatchObject({ code: "invalid-cancel-body" });
  });

  it("another workspace's cancel of a RUNNING execution answers 404 and touches nothing: its steps run on and it completes", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("X"), total: 3 } });
    const untouched = async () => ({
      steps: await stepsOf(id),
      cancelled: await eventsOf(id, "cancelled"),
      attempts: (await env.DB.prepare("SELECT epoch, outcome FROM step_attempts WHERE execution_id = ?1").bind(id).all()).results,
    });

    // The charge DISPATCHED (its message queued).
    const dispatched = await untouched();
    const foreign = await cancel(h, id, { token: "other-token", body: { releaseIdentity: true } });
    expect(foreign.status).toBe(404);
    expect(await untouched()).toEqual(dispatched);
    expect(await executionStatus(id)).toBe("RUNNING");

    // The charge EXECUTING (sent, its attempt open): the other workspace cancels before the settle.
    const [message] = h.queue.take();
    type State = Awaited<ReturnType<typeof untouched>>;
    let during: { status: number; before: State; after: State } | undefined;
    await h.deliver([message!.body], {
      afterRun: async () => {
        const before = await untouched();
        const answer = await cancel(h, id, { token: "other-token" });
        during = { status: answer.status, before, after: await untouched() };
      },
    });
    expect(during!.status).toBe(404);
    expect(during!.before.steps.charge).toMatchObject({ state: "EXECUTING", epoch: 1 });
    expect(during!.after).toEqual(during!.before);
    // Its settle was not fenced out, and the execution finishes normally.
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await stepsOf(id)).toMatchObject({ charge: { state: "COMPLETED", epoch: 1 }, done: { state: "COMPLETED" } });
    expect(await eventsOf(id, "cancelled")).toEqual([]);
    expect(await eventsOf(id, "fenced_out")).toEqual([]);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("keeps the identity (a duplicate trigger is absorbed) unless the cancel asked to release it", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const trigger = (payload: unknown) =>
      callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload }).then(
        (r) => r.json() as Promise<{ executionId: string; deduplicated: boolean; status: string }>,
      );
    const payload = { order: { id: unique("I"), total: 4 } };
    const started = await trigger(payload);
    await cancel(h, started.executionId);
    expect(await trigger(payload)).toMatchObject({ executionId: started.executionId, deduplicated: true, status: "CANCELLED" });

    const other = { order: { id: unique("J"), total: 4 } };
    const second = await trigger(other);
    const windowEnd = async (id: string) =>
      (await (await callApp(h, "GET", `/v1/executions/${id}`)).json()) as { createdAt: string; dedupeWindowEnd: string | null };
    // The trace says until when the identity holds: the default window of 24 h from the claim.
    const held = await windowEnd(second.executionId);
    expect(Date.parse(held.dedupeWindowEnd!) - Date.parse(held.createdAt)).toBe(24 * 3_600_000);
    const released = await cancel(h, second.executionId, { body: { releaseIdentity: true } });
    expect(await released.json()).toMatchObject({ status: "CANCELLED", identityReleased: true });
    expect(Date.parse((await windowEnd(second.executionId)).dedupeWindowEnd!)).toBeLessThanOrEqual(Date.now());
    const anew = await trigger(other);
    expect(anew.deduplicated).toBe(false);
    expect(anew.executionId).not.toBe(second.executionId);
    // The identity now names the new execution: the old one holds none, the new one a fresh window.
    expect((await windowEnd(second.executionId)).dedupeWindowEnd).toBeNull();
    expect(Date.parse((await windowEnd(anew.executionId)).dedupeWindowEnd!)).toBeGreaterThan(Date.now());
  });
});

describe("never two live executions of one trigger", () => {
  it("start over is refused while the execution runs, and allowed once it is cancelled: same keys, one charge", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("S"), total: 5 } });
    const [first] = h.queue.take();
    await h.deliver([first!.body], {
      afterRun: () => {
        throw new Error("worker died"); // the charge went out; the step stays EXECUTING
      },
    });
    const running = await startOver(h, id);
    expect(running.status).toBe(409);
    expect(await running.json()).toMatchObject({ code: "execution-running" });
    await cancel(h, id);
    const restarted = await startOver(h, id);
    expect(restarted.status).toBe(202);
    const { executionId } = (await restarted.json()) as { executionId: string };
    await h.drain();
    expect(await executionStatus(executionId)).toBe("COMPLETED");
    expect((await stepsOf(executionId)).charge!.idempotency_key).toBe((await stepsOf(id)).charge!.idempotency_key);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("two concurrent start overs leave one live execution; the other is refused naming it", async () => {
    const h = harness();
    const id = await completedCharge(h);
    const answers = await Promise.all([startOver(h, id), startOver(h, id)]);
    expect(answers.map((a) => a.status).sort()).toEqual([202, 409]);
    const started = (await answers.find((a) => a.status === 202)!.json()) as { executionId: string };
    expect(await answers.find((a) => a.status === 409)!.json()).toMatchObject({
      code: "live-execution-exists",
      detail: expect.stringContaining(started.executionId),
    });
    expect(await liveInLineage(id)).toBe(1);
    // Also from the new one's side: a start over of the first while its successor runs.
    expect((await startOver(h, id)).status).toBe(409);
  });

  it("a step retry racing a start over: whichever commits first, the other is refused in its own batch", async () => {
    // The route answers a RUNNING execution early; the batches must refuse on their own, so the
    // start over here goes straight to ingress (no early read) and the retry straight to the ledger.
    const ledgerStartOver = async (h: Harness, id: string) => {
      const wf = (await env.DB.prepare("SELECT workflow_id, version FROM executions WHERE id = ?1").bind(id).first<{
        workflow_id: string;
        version: string;
      }>())!;
      return h.startOver((await getWorkflow(env.DB, WS, wf.workflow_id, wf.version))!, {}, id);
    };
    const ledgerRetry = (h: Harness, id: string) => retryFailedStep(env.DB, WS, { executionId: id, vertexId: "charge" }, h.clock.now());

    const h = harness();
    const retriedFirst = await failedExecution(h);
    expect(await ledgerRetry(h, retriedFirst)).toMatchObject({ retried: true });
    await expect(ledgerStartOver(h, retriedFirst)).rejects.toMatchObject({ code: "execution-running" });
    expect(await liveInLineage(retriedFirst)).toBe(1);

    const startedFirst = await failedExecution(h);
    const { executionId } = await ledgerStartOver(h, startedFirst);
    expect(await ledgerRetry(h, startedFirst)).toEqual({ retried: false, reason: "live-execution", liveExecutionId: executionId });
    expect(await liveInLineage(startedFirst)).toBe(1);

    for (let round = 0; round < 3; round++) {
      const id = await failedExecution(h);
      const outcomes = await Promise.allSettled([ledgerRetry(h, id), ledgerStartOver(h, id)]);
      const won = [outcomes[0].status === "fulfilled" && outcomes[0].value.retried, outcomes[1].status === "fulfilled"];
      expect(won.filter(Boolean)).toHaveLength(1);
      expect(await liveInLineage(id)).toBe(1);
    }
  });

  it("a retry answers 409 while a start over of its execution is live, and for a cancelled execution's step", async () => {
    const h = harness();
    const id = await failedExecution(h);
    const restarted = (await (await startOver(h, id)).json()) as { executionId: string };
    const refused = await retry(h, id);
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: "live-execution-exists", detail: expect.stringContaining(restarted.executionId) });
    expect((await stepsOf(id)).charge!.state).toBe("FAILED");

    // A FAILED step of a CANCELLED execution (a branch that failed before the cancel).
    await cancel(h, restarted.executionId);
    await env.DB.prepare("UPDATE steps SET state = 'FAILED', error = 'boom' WHERE execution_id = ?1 AND vertex_id = 'charge'")
      .bind(restarted.executionId)
      .run();
    const cancelled = await retry(h, restarted.executionId);
    expect(cancelled.status).toBe(409);
    expect(await cancelled.json()).toMatchObject({ code: "execution-cancelled" });
    // With nothing live, the first execution's step may be retried again.
    expect((await retry(h, id)).status).toBe(202);
  });
});
