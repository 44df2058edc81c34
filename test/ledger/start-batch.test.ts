/**
 * The start batch's execution upsert (src/ledger/start-execution-row.ts `startExecutionRow`), driven directly
 * with ids chosen by the test: its `DO UPDATE` counts a duplicate only on a row another request's
 * claim names. A conflict on the execution id this request's own claim chose is a collision, never
 * a duplicate — the request must not be answered "deduplicated" for an execution it did not join.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { DEFAULT_RETENTION } from "../../src/history/retention";
import { startExecution, type NewExecution, type StartPlan } from "../../src/ledger";

const WS = "start-batch";
const plan: StartPlan = { steps: [{ vertexId: "shape", state: "DISPATCHED" }], entryNext: ["shape"] };
const record: NewExecution = {
  workspace: WS,
  workflowId: "wf",
  version: "v1",
  entryVertexId: "received",
  triggerKind: "test",
  identityKind: "forced",
  payloadJson: "{}",
  retention: { ...DEFAULT_RETENTION },
};

describe("the start batch's execution upsert", () => {
  it("a claim whose own execution id is taken already counts no duplicate on it and starts nothing", async () => {
    const identity = "c".repeat(64);
    const window = "d".repeat(64);
    const alternate = "e".repeat(64);
    // Both candidate ids exist, finished (forced starts with those ids and nothing to run, so no
    // live execution holds the identity): the claim takes the alternate id, which collides.
    const finished: StartPlan = { steps: [], entryNext: [] };
    for (const executionId of [window, alternate]) {
      const forced = await startExecution(env.DB, record, { mode: "forced", executionId, plan: finished }, 1);
      expect(forced).toMatchObject({ created: true, executionId, status: "COMPLETED" });
    }
    const claim = startExecution(
      env.DB,
      { ...record, triggerKind: "webhook", identityKind: "content" },
      {
        mode: "claim",
        identity,
        claimToken: "token-mine",
        executionId: window,
        alternateExecutionId: alternate,
        expiresAt: 10_000,
        plans: { first: plan, alternate: plan },
      },
      2,
    );
    await expect(claim).rejects.toThrow(/wrote nothing/);
    const row = await env.DB.prepare("SELECT duplicate_deliveries AS n, duplicate_log AS log FROM executions WHERE id = ?1")
      .bind(alternate)
      .first<{ n: number; log: string | null }>();
    expect(row).toEqual({ n: 0, log: null });
  });
});
