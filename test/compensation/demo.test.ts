/**
 * The shipped example workflows/order-with-refund.json through the demo (demo/src: payments,
 * shipping, refunds) with its connectors (connectors/demo-payments.json, demo-shipping.json): an
 * order whose address the carrier refuses (422, not retried) is charged once, then refunded once
 * with its own key at the demo's refunds API; the execution COMPENSATED. A deliverable order is
 * shipped and never refunded (docs/steps.md "Compensation").
 */
import { env } from "cloudflare:test";
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import payments from "../../connectors/demo-payments.json";
import shipping from "../../connectors/demo-shipping.json";
import workflow from "../../workflows/order-with-refund.json";
import { getWorkflow } from "../../src/definitions/store";
import { createDemoTables } from "../helpers/demo-tables";
import { putJson, WS } from "../flow/helpers";
import { demoHarness, executionStatus, stepsOf } from "../steps/helpers";

beforeAll(createDemoTables);
beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

describe("workflows/order-with-refund.json through the demo", () => {
  it("an undeliverable order is charged, then refunded once (refund-<order>-charge); a deliverable one is not refunded", async () => {
    const h = demoHarness();
    for (const c of [payments, shipping]) expect((await putJson(h, `/v1/connectors/${c.name}`, c)).status).toBeLessThan(300);
    const saved = await putJson(h, `/v1/workflows/${workflow.id}`, workflow);
    expect(saved.status, JSON.stringify(saved.body)).toBeLessThan(300);
    const wf = (await getWorkflow(env.DB, WS, workflow.id))!;
    const stamp = Date.now();
    const bad = { order: { id: `OWR-${stamp}`, total: 25, address: "undeliverable" } };
    const good = { order: { id: `OWR-${stamp}-ok`, total: 30, address: "1 Main St" } };
    const badId = await h.start(wf, bad);
    const goodId = await h.start(wf, good);
    await h.drain(200);
    expect(await executionStatus(badId)).toBe("COMPENSATED");
    expect(await executionStatus(goodId)).toBe("COMPLETED");
    expect((await stepsOf(badId)).ship!.error).toContain("422");
    const demo = async (path: string) => (await (await h.rt.fetch(`http://localhost:8788${path}`)).json()) as { items: unknown[] };
    const refunds = (await demo(`/refunds/calls?order=${bad.order.id}`)).items as Array<{ idempotencyKey: string; outcome: string }>;
    expect(refunds.map((r) => [r.idempotencyKey, r.outcome])).toEqual([[`refund-${bad.order.id}-charge`, "created"]]);
    expect((await demo(`/refunds/calls?order=${good.order.id}`)).items).toEqual([]);
  });
});
