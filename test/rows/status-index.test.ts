/**
 * `executions_by_status` keeps no COMPLETED entry (migrations/0033, issue 47 point 2): an execution
 * that completes leaves the index instead of writing a new entry. The list's status filters still
 * walk an index in order (COMPLETED the workspace's, the others the status index), the stuck-step
 * scan still finds RUNNING executions through it, and every filter answers the same executions.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { listExecutionRecords, listQuery, type ExecutionListFilter } from "../../src/ledger";
import { planOf } from "../helpers/query-plans";

const WS = "rows-status";

const insert = (id: string, status: string, createdAt: number) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, lineage_id, created_at, updated_at, finished_at)
     VALUES (?1, ?4, 'wf', 'v1', 'received', 'webhook', 'forced', NULL, ?2, '{}', ?1, ?3, ?3, iif(?2 = 'RUNNING', NULL, ?3 + 1))`,
  ).bind(id, status, createdAt, WS);

async function plan(filter: Omit<ExecutionListFilter, "limit">): Promise<string> {
  const { sql, params } = listQuery(WS, { limit: 20, ...filter });
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...params)
    .all<{ detail: string }>();
  return results.map((r) => r.detail).join(" | ");
}

describe("executions_by_status without COMPLETED", () => {
  it("a status filter walks an index in order: the status index for all but COMPLETED, the workspace's for COMPLETED", async () => {
    for (const status of ["RUNNING", "FAILED", "CANCELLED", "COMPENSATING"] as const) {
      expect(await plan({ status })).toMatch(/USING INDEX executions_by_status/);
    }
    const completed = await plan({ status: "COMPLETED" });
    expect(completed).toMatch(/USING INDEX executions_by_workspace/);
    expect(completed).not.toMatch(/TEMP B-TREE/);
  });

  it("the stuck-step scan reads RUNNING executions through the status index", async () => {
    const sql = `SELECT e.id FROM executions e
                 WHERE e.workspace = ?1 AND e.status = 'RUNNING' AND e.status <> 'COMPLETED' AND e.created_at <= ?2`;
    expect((await planOf(sql)).join(" | ")).toMatch(/executions_by_status/);
  });

  it("every filter answers the same executions, newest first, before and after a completion and a failure", async () => {
    await env.DB.batch([
      insert("r1", "RUNNING", 1_000),
      insert("c1", "COMPLETED", 2_000),
      insert("f1", "FAILED", 3_000),
      insert("c2", "COMPLETED", 4_000),
      insert("r2", "RUNNING", 5_000),
    ]);
    const ids = async (filter: Omit<ExecutionListFilter, "limit">) =>
      (await listExecutionRecords(env.DB, WS, { limit: 20, ...filter })).map((r) => (r as { id: string }).id);
    expect(await ids({})).toEqual(["r2", "c2", "f1", "c1", "r1"]);
    expect(await ids({ status: "COMPLETED" })).toEqual(["c2", "c1"]);
    expect(await ids({ status: "RUNNING" })).toEqual(["r2", "r1"]);
    expect(await ids({ status: "FAILED" })).toEqual(["f1"]);

    await env.DB.prepare("UPDATE executions SET status = 'COMPLETED', finished_at = 6000, updated_at = 6000 WHERE id = 'r2'").run();
    await env.DB.prepare("UPDATE executions SET status = 'FAILED', finished_at = 6000, updated_at = 6000 WHERE id = 'r1'").run();
    expect(await ids({ status: "COMPLETED" })).toEqual(["r2", "c2", "c1"]);
    expect(await ids({ status: "FAILED" })).toEqual(["f1", "r1"]);
    expect(await ids({ status: "RUNNING" })).toEqual([]);
  });
});
