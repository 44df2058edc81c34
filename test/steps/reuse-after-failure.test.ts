/**
 * Reuse after failure (SPEC section 3): with `reusePolicy: "after-failure"`, a trigger whose
 * identity names a FAILED execution starts a new one, linked to it, in the same atomic claim;
 * every other status keeps absorbing duplicates, and the superseded execution is left alone.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { callApp, chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "dev"; // dev-token's workspace

/** entry (identity: order.id, and the reuse policy) → charge → done. */
function reusingWorkflow(reusePolicy?: "never" | "after-failure"): WorkflowDefinitionInput {
  const wf = chargeWorkflow(unique("wf"));
  wf.vertices[0] = {
    id: "received",
    type: "ENTRY_POINT",
    config: { idempotencyFields: "order.id", ...(reusePolicy ? { reusePolicy } : {}) },
  };
  return wf;
}

interface Started {
  executionId: string;
  deduplicated: boolean;
  status: string;
}

const trigger = async (h: Harness, workflowId: string, payload: unknown) => {
  const response = await callApp(h, "POST", `/v1/workflows/${workflowId}/trigger`, { body: payload });
  return { status: response.status, body: (await response.json()) as Started };
};

const traceOf = async (h: Harness, id: string) =>
  (await (await callApp(h, "GET", `/v1/executions/${id}`)).json()) as { previousExecutionId: string | null; supersededBy: string | null };

/** A workflow with `policy` and one execution of it whose charge failed for good (three 500s). */
async function failedOnce(h: Harness, policy?: "never" | "after-failure") {
  const wf = await seedWorkflow(WS, reusingWorkflow(policy));
  const payload = { order: { id: unique("F"), total: 8 } };
  h.dest.fault("/payments/charges", 500, 3);
  const first = await trigger(h, wf.workflowId, payload);
  await h.drain();
  expect(await executionStatus(first.body.executionId)).toBe("FAILED");
  return { wf, payload, failed: first.body.executionId };
}

describe("reuse after failure", () => {
  it("by default (never), a FAILED execution absorbs its duplicates until the window ends", async () => {
    const h = harness();
    const { wf, payload, failed } = await failedOnce(h);
    expect(await trigger(h, wf.workflowId, payload)).toEqual({
      status: 200,
      body: expect.objectContaining({ executionId: failed, deduplicated: true, status: "FAILED" }),
    });
  });

  it("after-failure: the next trigger starts a new execution linked both ways; it sends the same key and charges once", async () => {
    const h = harness();
    const { wf, payload, failed } = await failedOnce(h, "after-failure");
    const again = await trigger(h, wf.workflowId, payload);
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ deduplicated: false, status: "RUNNING" });
    const next = again.body.executionId;
    expect(next).not.toBe(failed);
    await h.drain();
    expect(await executionStatus(next)).toBe("COMPLETED");
    expect((await stepsOf(next)).charge!.idempotency_key).toBe((await stepsOf(failed)).charge!.idempotency_key);
    expect(h.dest.effects).toHaveLength(1);
    expect(await traceOf(h, next)).toMatchObject({ previousExecutionId: failed, supersededBy: null });
    expect(await traceOf(h, failed)).toMatchObject({ previousExecutionId: null, supersededBy: next });
    // Now COMPLETED, the new execution absorbs the next duplicate.
    expect((await trigger(h, wf.workflowId, payload)).body).toMatchObject({ executionId: next, deduplicated: true });
  });

  it("50 concurrent triggers of a FAILED identity start exactly one new execution", async () => {
    const h = harness();
    const { wf, payload, failed } = await failedOnce(h, "after-failure");
    const answers = await Promise.all(Array.from({ length: 50 }, () => trigger(h, wf.workflowId, payload)));
    const created = answers.filter((a) => a.status === 202);
    expect(created).toHaveLength(1);
    const next = created[0]!.body.executionId;
    expect(answers.filter((a) => a.status === 200 && a.body.executionId === next && a.body.deduplicated)).toHaveLength(49);
    const rows = await env.DB.prepare("SELECT id FROM executions WHERE workflow_id = ?1 ORDER BY created_at").bind(wf.workflowId).all();
    expect(rows.results.map((r) => r.id)).toEqual([failed, next]);
  });

  it("RUNNING, COMPLETED and CANCELLED executions absorb duplicates under after-failure too", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, reusingWorkflow("after-failure"));
    const running = { order: { id: unique("R"), total: 1 } };
    const started = (await trigger(h, wf.workflowId, running)).body.executionId;
    expect((await trigger(h, wf.workflowId, running)).body).toMatchObject({ executionId: started, deduplicated: true, status: "RUNNING" });
    await h.drain();
    expect((await trigger(h, wf.workflowId, running)).body).toMatchObject({ executionId: started, status: "COMPLETED" });

    const cancelled = { order: { id: unique("C"), total: 1 } };
    const toCancel = (await trigger(h, wf.workflowId, cancelled)).body.executionId;
    await callApp(h, "POST", `/v1/executions/${toCancel}/cancel`, { key: unique("op") });
    expect((await trigger(h, wf.workflowId, cancelled)).body).toMatchObject({ executionId: toCancel, status: "CANCELLED" });
  });

  it("the superseded execution is neither retried nor started over; a live start over of it blocks the reuse", async () => {
    const h = harness();
    const { wf, payload, failed } = await failedOnce(h, "after-failure");
    // While a start over of the failed execution runs, a trigger is a duplicate, not a reuse.
    const restart = (await (await callApp(h, "POST", `/v1/executions/${failed}/start-over`, { key: unique("op") })).json()) as Started;
    expect((await trigger(h, wf.workflowId, payload)).body).toMatchObject({ executionId: failed, deduplicated: true });
    await callApp(h, "POST", `/v1/executions/${restart.executionId}/cancel`, { key: unique("op") });

    const next = (await trigger(h, wf.workflowId, payload)).body.executionId;
    expect(next).not.toBe(failed);
    for (const path of [`/v1/executions/${failed}/steps/charge/retry`, `/v1/executions/${failed}/start-over`]) {
      const refused = await callApp(h, "POST", path, { key: unique("op") });
      expect(refused.status).toBe(409);
      expect(await refused.json()).toMatchObject({ code: "execution-superseded", detail: expect.stringContaining(next) });
    }
  });
});
