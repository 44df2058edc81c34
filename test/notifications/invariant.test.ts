/**
 * The outbox's invariant on real D1: every FAILED execution of a workspace that wants
 * `execution.failed` has exactly one such row — whichever settle finishes it (the last to settle
 * can be a COMPLETED sibling of the FAILED step), however often it fails (an operator retry that
 * fails again keeps the one row and its webhook-id), and nothing of it stays once it is erased.
 */
import { createExecutionContext, env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { DEMO_NOTIFICATION_SECRET } from "../../demo/src/notifications";
import { callApp, chargeWorkflow, DEST, executionStatus, failedCharge, harness, seedWorkflow, unique } from "../steps/helpers";

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

async function configure() {
  const call = (method: string, path: string, body: unknown) =>
    app.fetch(
      new Request(`http://idemflow.test${path}`, {
        method,
        headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
      env,
      createExecutionContext(),
    );
  expect((await call("PUT", "/v1/secrets/NOTIFY", { value: DEMO_NOTIFICATION_SECRET })).status).toBe(200);
  expect(
    (await call("PUT", "/v1/notifications", { url: `${DEST}/notifications`, secret: "NOTIFY", events: ["execution.failed"] })).status,
  ).toBe(200);
}

async function failedRows(executionId: string): Promise<string[]> {
  const { results } = await env.DB.prepare(
    "SELECT webhook_id FROM notification_outbox WHERE execution_id = ?1 AND event = 'execution.failed'",
  )
    .bind(executionId)
    .all<{ webhook_id: string }>();
  return results.map((r) => r.webhook_id);
}

/** received → charge and received → label, side by side: the execution finishes when both settled. */
function twoBranches(): WorkflowDefinitionInput {
  const base = chargeWorkflow(unique("wf")) as unknown as { vertices: unknown[]; edges: unknown[] };
  return {
    ...base,
    vertices: [
      ...base.vertices.filter((v) => (v as { id: string }).id !== "done"),
      {
        id: "label",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/shipping/labels`,
          headers: { "Idempotency-Key": "= $idempotencyKey('label', payload.order.id)" },
        },
      },
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "received", to: "label" },
    ],
  } as unknown as WorkflowDefinitionInput;
}

describe("each FAILED execution has exactly one execution.failed row", () => {
  it("when a COMPLETED sibling is the last to settle, its settle writes the row", async () => {
    await configure();
    const h = harness({}, { workspace: "dev" });
    const wf = await seedWorkflow("dev", twoBranches());
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    const label = h.queue.pending.find((m) => m.body.vertexId === "label")!;
    h.queue.pending = h.queue.pending.filter((m) => m !== label);
    h.dest.fault("/payments/charges", 500, 3);
    await h.drain();
    expect(await executionStatus(id)).toBe("RUNNING"); // the charge FAILED; the label has not run
    expect(await failedRows(id)).toEqual([]);
    h.clock.advance(5_000); // the label settles later than the charge failed
    await h.deliver([label.body]);
    expect(await executionStatus(id)).toBe("FAILED");
    expect(await failedRows(id)).toEqual([`idemflow.execution.failed.${id}`]);
  });

  it("an operator retry that fails again keeps the one row; an erasure removes it", async () => {
    await configure();
    const h = harness({}, { workspace: "dev" });
    const { id } = await failedCharge(h, "dev");
    expect(await failedRows(id)).toHaveLength(1);
    h.dest.fault("/payments/charges", 500, 3);
    expect((await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op") })).status).toBe(202);
    await h.drain();
    expect(await executionStatus(id)).toBe("FAILED");
    expect(await failedRows(id)).toEqual([`idemflow.execution.failed.${id}`]);
    expect((await callApp(h, "DELETE", `/v1/executions/${id}`, { key: unique("erase") })).status).toBe(200);
    const { results } = await env.DB.prepare("SELECT * FROM notification_outbox WHERE execution_id = ?1").bind(id).all();
    expect(results).toEqual([]);
  });
});
