/**
 * The demo's rate-limited API (demo/src/limited.ts) through the shipped connector and workflow
 * (connectors/demo-limited.json, workflows/limited-charges.json): the destination's own record shows
 * the connector's limits held — never more than 5 in flight, no 429 — and one effect per order.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import connector from "../../connectors/demo-limited.json";
import workflow from "../../workflows/limited-charges.json";
import { getWorkflow } from "../../src/definitions/store";
import { env } from "cloudflare:test";
import { demoHarness, executionStatus } from "../steps/helpers";
import { putJson, WS } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

describe("the demo's rate-limited API", () => {
  it("40 orders at once through demo-limited: at most 5 in flight, none refused, one charge each", async () => {
    const h = demoHarness();
    expect((await putJson(h, "/v1/connectors/demo-limited", connector)).status).toBeLessThan(300);
    expect((await putJson(h, `/v1/workflows/${workflow.id}`, workflow)).status).toBeLessThan(300);
    const wf = (await getWorkflow(env.DB, WS, workflow.id))!;
    const demo = async (method: string, path: string) => (await h.rt.fetch(`http://localhost:8788${path}`, { method })).json();
    await h.rt.fetch("http://localhost:8788/limited/record", { method: "DELETE" });
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push(await h.start(wf, { order: { id: `LIM-${i}-${Date.now()}`, total: 5 } }));
    await Promise.all(h.queue.take().map((m) => h.deliver([m.body])));
    await h.drain(2000);
    for (const id of ids) expect(await executionStatus(id)).toBe("COMPLETED");
    const record = (await demo("GET", "/limited/record")) as { maxInFlight: number; refused: number; effects: number; doubled: number };
    expect(record).toMatchObject({ refused: 0, effects: 40, doubled: 0 });
    expect(record.maxInFlight).toBeLessThanOrEqual(5);
    expect(record.maxInFlight).toBeGreaterThan(1);
  });
});
