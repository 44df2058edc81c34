/**
 * The start service against real D1 and the real queue binding, with the counting D1 wrapper and
 * a counting queue: budgets, messages, the race at the service level, the dedupe window.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { countingD1 } from "../helpers/counting-d1";
import { triggerFromRequest } from "../../src/ingress/trigger";
import { sweepExpiredIdentities } from "../../src/ledger";
import { deriveIdentity, windowExecutionId } from "../../src/ingress/identity";
import { BASE, countRows, countingQueue, jsonRequest, seedWorkflow, transformWorkflow, unique } from "./helpers";

function harness(clock = { now: Date.now() }) {
  const counted = countingD1(env.DB);
  const { queue, sent } = countingQueue();
  const deps = { db: counted.db, queue, now: () => clock.now };
  const fire = (workflowId: string, body: unknown, query = "") =>
    triggerFromRequest(deps, {
      workspace: "dev",
      workflowId,
      invocation: "production",
      request: jsonRequest(`${BASE}/v1/workflows/${workflowId}/trigger${query}`, body),
    });
  return { counted, sent, deps, fire, clock };
}

describe("the start service", () => {
  it(
    "starts a new trigger in ONE D1 round trip (the start batch) once the workflow is cached, then sends one message per " + "first step",
    async () => {
      const id = unique("budget");
      await seedWorkflow("dev", transformWorkflow(id));
      const h = harness();
      // Cold isolate: read the workflow (1), then the start batch (1).
      const cold = await h.fire(id, { order: 0 });
      expect(cold.deduplicated).toBe(false);
      expect(h.counted.calls.map((c) => c.kind)).toEqual(["statement", "batch"]);
      h.counted.reset();
      h.sent.length = 0;

      const result = await h.fire(id, { order: 1 });
      expect(result.deduplicated).toBe(false);
      expect(h.counted.roundTrips()).toBe(1);
      expect(h.counted.calls[0]!.kind).toBe("batch");
      expect(h.sent).toEqual([{ executionId: result.executionId, vertexId: "shape" }]);
    },
  );

  it("answers a duplicate in one round trip and sends no message", async () => {
    const id = unique("budgetdup");
    await seedWorkflow("dev", transformWorkflow(id));
    const h = harness();
    const created = await h.fire(id, { order: 1 });
    h.counted.reset();
    h.sent.length = 0;
    const duplicate = await h.fire(id, { order: 1 });
    expect(duplicate).toEqual({ ...created, deduplicated: true });
    expect(h.counted.roundTrips()).toBe(1);
    // Three statements; of them only the execution's count writes (test/ingress/cost-budgets.test.ts).
    expect(h.counted.statements()).toBe(3);
    expect(h.sent).toEqual([]);
  });

  it("never starts a superseded version from a stale cache: the version gate writes nothing, the retry uses the new one", async () => {
    const id = unique("stale");
    const v1 = await seedWorkflow("dev", transformWorkflow(id));
    const h = harness();
    await h.fire(id, { warm: true });
    const v2 = await seedWorkflow("dev", transformWorkflow(id, { dedupeWindow: "2h" }));
    expect(v2.version).not.toBe(v1.version);
    h.counted.reset();
    const result = await h.fire(id, { after: "update" });
    expect(result.deduplicated).toBe(false);
    // Gated batch (vetoed), re-read, start.
    expect(h.counted.calls.map((c) => c.kind)).toEqual(["batch", "statement", "batch"]);
    const row = await env.DB.prepare("SELECT version FROM executions WHERE id = ?").bind(result.executionId).first<{ version: string }>();
    expect(row?.version).toBe(v2.version);
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(2);
  });

  it("sends one set of first-step messages for 50 concurrent identical triggers", async () => {
    const id = unique("race");
    await seedWorkflow("dev", transformWorkflow(id));
    const h = harness();
    const results = await Promise.all(Array.from({ length: 50 }, () => h.fire(id, { same: "body" })));
    expect(results.filter((r) => !r.deduplicated)).toHaveLength(1);
    expect(new Set(results.map((r) => r.executionId)).size).toBe(1);
    expect(h.sent).toEqual([{ executionId: results[0]!.executionId, vertexId: "shape" }]);
    expect(await countRows("SELECT duplicate_deliveries AS n FROM executions WHERE id = ?", results[0]!.executionId)).toBe(49);
    // Each duplicate wrote its count and its log entry on the execution's row, and nothing on the identity's (migrations/0024).
    expect(await countRows("SELECT json_array_length(duplicate_log) AS n FROM executions WHERE id = ?", results[0]!.executionId)).toBe(49);
    expect(await countRows("SELECT count(*) AS n FROM pragma_table_info('execution_identities') WHERE name = 'duplicate_deliveries'")).toBe(
      0,
    );
  });

  it("starts a new execution for the same trigger after the dedupe window, once its backdated identity is swept", async () => {
    const id = unique("window");
    await seedWorkflow("dev", transformWorkflow(id, { dedupeWindow: "1h" }));
    const t0 = Date.now();
    const h = harness({ now: t0 });
    const first = await h.fire(id, { order: 1 });
    h.clock.now = t0 + 30 * 60_000;
    expect((await h.fire(id, { order: 1 })).deduplicated).toBe(true);
    // Finished: a RUNNING execution keeps its identity past the window (test/ledger/one-live-execution.test.ts).
    await env.DB.prepare("UPDATE executions SET status = 'COMPLETED', finished_at = ?2 WHERE id = ?1").bind(first.executionId, t0).run();

    // Another identity that is still fresh at the sweep time must survive it.
    const survivor = await h.fire(id, { order: 2 });
    const identityOf = (order: number) =>
      deriveIdentity({
        workspace: "dev",
        workflowId: id,
        entryVertexId: "received",
        kind: "content",
        material: ["json", { order }],
        scope: "production",
      });
    // Every window's id, the first's too, is derived from the identity and the window's start (never the bare identity).
    expect(first.executionId).toBe(await windowExecutionId(await identityOf(1), t0));

    const afterWindow = t0 + 60 * 60_000 + 1;
    const swept = await sweepExpiredIdentities(env.DB, afterWindow);
    expect(swept.deleted).toBeGreaterThanOrEqual(1);
    expect(await countRows("SELECT count(*) AS n FROM execution_identities WHERE identity = ?", await identityOf(1))).toBe(0);
    expect(await countRows("SELECT count(*) AS n FROM execution_identities WHERE identity = ?", await identityOf(2))).toBe(1);

    h.clock.now = afterWindow;
    const second = await h.fire(id, { order: 1 });
    expect(second.deduplicated).toBe(false);
    expect(second.executionId).not.toBe(first.executionId);
    // History stays: both executions exist, the old one with its duplicate count.
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ? AND identity = ?", id, await identityOf(1))).toBe(2);
    expect(await countRows("SELECT duplicate_deliveries AS n FROM executions WHERE id = ?", first.executionId)).toBe(1);
    // And the new window dedupes too.
    expect((await h.fire(id, { order: 1 })).executionId).toBe(second.executionId);
    expect(survivor.deduplicated).toBe(false);
  });

  it("plans a new window's steps with the new execution id when an entry edge reads execution.id", async () => {
    const id = unique("idplan");
    const identity = await deriveIdentity({
      workspace: "dev",
      workflowId: id,
      entryVertexId: "received",
      kind: "content",
      material: ["json", { order: 1 }],
      scope: "production",
    });
    const t0 = Date.now();
    // Taken only for the first window's execution id (the identity and the window's start).
    const firstId = await windowExecutionId(identity, t0);
    await seedWorkflow(
      "dev",
      transformWorkflow(id, { dedupeWindow: "10m" }, { edges: [{ from: "received", to: "shape", when: `= execution.id = '${firstId}'` }] }),
    );
    const h = harness({ now: t0 });
    const stateOf = async (executionId: string) =>
      (await env.DB.prepare("SELECT state FROM steps WHERE execution_id = ? AND vertex_id = 'shape'")
        .bind(executionId)
        .first<{ state: string }>())!.state;
    const first = await h.fire(id, { order: 1 });
    expect(first.executionId).toBe(firstId);
    expect(first.executionId).not.toBe(identity);
    expect(await stateOf(first.executionId)).toBe("DISPATCHED");
    // Finished: a RUNNING execution keeps its identity past the window (test/ledger/one-live-execution.test.ts).
    await env.DB.prepare("UPDATE executions SET status = 'COMPLETED', finished_at = ?2 WHERE id = ?1").bind(first.executionId, t0).run();
    h.clock.now = t0 + 10 * 60_000;
    const second = await h.fire(id, { order: 1 });
    expect(second.deduplicated).toBe(false);
    expect(second.executionId).toBe(await windowExecutionId(identity, t0 + 10 * 60_000));
    expect(await stateOf(second.executionId)).toBe("SKIPPED");
    expect(second.status).toBe("COMPLETED");
  });

  it("takes over an expired identity that was not swept yet, in the claim itself", async () => {
    const id = unique("takeover");
    await seedWorkflow("dev", transformWorkflow(id, { dedupeWindow: "10m" }));
    const t0 = Date.now();
    const h = harness({ now: t0 });
    const first = await h.fire(id, { order: 1 });
    // Finished: a RUNNING execution keeps its identity past the window (test/ledger/one-live-execution.test.ts).
    await env.DB.prepare("UPDATE executions SET status = 'COMPLETED', finished_at = ?2 WHERE id = ?1").bind(first.executionId, t0).run();
    h.clock.now = t0 + 10 * 60_000;
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => h.fire(id, { order: 1 })));
    const created = concurrent.filter((r) => !r.deduplicated);
    expect(created).toHaveLength(1);
    expect(created[0]!.executionId).not.toBe(first.executionId);
    expect(new Set(concurrent.map((r) => r.executionId)).size).toBe(1);
  });

  it("sweeps in bounded batches", async () => {
    const now = Date.now() + 400 * 86_400_000; // everything in this file is expired by then
    const total = await countRows("SELECT count(*) AS n FROM execution_identities WHERE expires_at <= ?", now);
    expect(total).toBeGreaterThan(2);
    const report = await sweepExpiredIdentities(env.DB, now, { batchSize: 1, maxBatches: 2 });
    expect(report).toEqual({ deleted: 2, batches: 2, drained: false });
  });
});
