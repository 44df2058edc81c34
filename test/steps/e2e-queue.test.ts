/**
 * End to end through the real pieces: the trigger route (ingress), the real queue binding
 * delivering to the Worker's own queue handler (src/index.ts), D1. Outbound calls from the
 * Worker go to the destination through a `fetch` interceptor (the network boundary only).
 */
import { env, SELF } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { chargeWorkflow, Destination, seedWorkflow, stepsOf, unique } from "./helpers";

afterEach(() => vi.restoreAllMocks());

async function waitFor(executionId: string, timeoutMs = 15_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const row = await env.DB.prepare("SELECT status FROM executions WHERE id = ?1").bind(executionId).first<{ status: string }>();
    if (row && row.status !== "RUNNING") return row.status;
    if (Date.now() > until) return row?.status ?? "missing";
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function trigger(workflowId: string, payload: unknown): Promise<string> {
  const res = await SELF.fetch(`http://idemflow.test/v1/workflows/${workflowId}/trigger`, {
    method: "POST",
    headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
    body: JSON.stringify(payload),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { executionId: string }).executionId;
}

describe("end to end over the real queue", () => {
  it("a TRANSFORM chain triggered over HTTP completes through the queue consumer", async () => {
    const wf = await seedWorkflow("dev", {
      id: unique("wf"),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        { id: "double", type: "TRANSFORM", config: { output: "= payload.n * 2" } },
        { id: "plus", type: "TRANSFORM", config: { output: "= steps.double + 1" } },
      ],
      edges: [
        { from: "entry", to: "double" },
        { from: "double", to: "plus" },
      ],
    } as WorkflowDefinitionInput);
    const id = await trigger(wf.workflowId, { n: 20 });
    expect(await waitFor(id)).toBe("COMPLETED");
    expect(JSON.parse((await stepsOf(id)).plus!.output!)).toBe(41);
  });

  it("a Gateway step over the real queue sends its key to the destination once, with a 503 retried", async () => {
    const dest = new Destination(unique("dest"));
    const realFetch = globalThis.fetch;
    vi.spyOn(globalThis, "fetch").mockImplementation((input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      return url.host === "localhost:8788" ? dest.fetch(input, init) : realFetch(input, init);
    });
    dest.fault("/payments/charges", 503, 1);
    const wf = await seedWorkflow(
      "dev",
      chargeWorkflow(unique("wf"), { retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 0, maxDelayMs: 0 } }),
    );
    const id = await trigger(wf.workflowId, { order: { id: unique("E2E"), total: 5 } });
    expect(await waitFor(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(steps.charge!.attempt).toBe(2);
    expect(dest.effects).toHaveLength(1);
    expect(new Set(dest.keysSent("/payments/charges"))).toEqual(new Set([steps.charge!.idempotency_key]));
  });
});
