/**
 * The shipped MAP example end to end: workflows/refund-lines.json through connectors/demo-refunds.json
 * (resolved as a save resolves it) against the demo's refunds API in-process (demo/src/refunds.ts):
 * one refund per order line under `refund-<order>-<sku>`, and a start over sends the same keys — the
 * demo's record of every call per key shows each key `created` once and `replayed` once, never a
 * `conflict` (two lines under one key), and still one refund per line.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { resolveConnectors } from "../../src/connectors/resolve";
import { ConnectorDefinition } from "../../src/connectors/schema";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { validateDefinition } from "../../src/definitions/validate";
import connectorFile from "../../connectors/demo-refunds.json";
import workflowFile from "../../workflows/refund-lines.json";
import { createDemoTables } from "../helpers/demo-tables";
import { demoHarness, executionStatus, seedWorkflow, stepsOf, unique } from "./helpers";

beforeAll(createDemoTables);

/** The example as PUT /v1/workflows saves it in workspace dev (which holds PAYMENTS_KEY). */
function resolvedExample(): WorkflowDefinitionInput {
  const connector = ConnectorDefinition.parse(connectorFile);
  const stored = { workspace: "dev", name: connector.name, version: "0".repeat(64), definition: connector, createdAt: 0 };
  const resolution = resolveConnectors({ ...workflowFile, id: unique("refund-lines") }, new Map([[connector.name, stored]]));
  expect(resolution.errors).toEqual([]);
  const result = validateDefinition(resolution.document);
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.definition as unknown as WorkflowDefinitionInput;
}

async function callsOf(orderId: string): Promise<Array<{ key: string; sku: string; outcome: string }>> {
  const { results } = await env.DB.prepare("SELECT idempotency_key AS key, sku, outcome FROM refund_calls WHERE order_id = ?1 ORDER BY id")
    .bind(orderId)
    .all<{ key: string; sku: string; outcome: string }>();
  return results;
}

describe("workflows/refund-lines.json through the demo's refunds API", () => {
  it("refunds each line once under its own key; a start over sends the same keys and refunds nothing twice", async () => {
    const h = demoHarness();
    const wf = await seedWorkflow("dev", resolvedExample(), env.DB);
    const orderId = unique("R");
    const payload = { order: { id: orderId, lines: ["A", "B", "C"].map((sku, i) => ({ sku, amount: 5 + i })) } };
    const keys = ["A", "B", "C"].map((sku) => `refund-${orderId}-${sku}`);

    const first = await h.start(wf, payload);
    await h.drain();
    expect(await executionStatus(first, env.DB)).toBe("COMPLETED");
    const steps = await stepsOf(first, env.DB);
    const output = JSON.parse(steps.refund!.output!) as {
      items: Array<{ sku: string; refund: string; status: number }>;
      failed: unknown[];
    };
    expect(output.failed).toEqual([]);
    expect(output.items.map((i) => [i.sku, i.status])).toEqual([
      ["A", 201],
      ["B", 201],
      ["C", 201],
    ]);
    expect(JSON.parse(steps.summary!.output!)).toEqual({ order: orderId, refunded: 3, failed: 0 });
    expect((await callsOf(orderId)).map((c) => [c.key, c.outcome])).toEqual(keys.map((k) => [k, "created"]));

    const again = await h.startOver(wf, payload, first);
    await h.drain();
    expect(await executionStatus(again.executionId, env.DB)).toBe("COMPLETED");
    const calls = await callsOf(orderId);
    expect(calls.filter((c) => c.outcome === "conflict")).toEqual([]);
    for (const key of keys) expect(calls.filter((c) => c.key === key).map((c) => c.outcome)).toEqual(["created", "replayed"]);
    const { results: refunds } = await env.DB.prepare("SELECT sku FROM refunds WHERE order_id = ?1 ORDER BY sku").bind(orderId).all();
    expect(refunds).toEqual([{ sku: "A" }, { sku: "B" }, { sku: "C" }]);
    // The start over's MAP answers the refunds the first execution made.
    const replayed = JSON.parse((await stepsOf(again.executionId, env.DB)).refund!.output!) as { items: Array<{ refund: string }> };
    expect(replayed.items.map((i) => i.refund)).toEqual(output.items.map((i) => i.refund));
  });
});
