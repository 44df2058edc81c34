/**
 * migrations/0009 rebuilds executions, steps and step_events (their CHECK constraints gain
 * CANCELLED) and adds each execution's lineage. This file's database (storage is per test file) is
 * taken back to the schema of 0008 — every table dropped, 0001–0008 applied — and populated; then
 * 0009 runs as `wrangler d1 migrations apply` runs it, in one batch. It keeps every row, column for
 * column, links each chain of start overs to its first execution, and leaves the foreign keys
 * whole. The later migrations then apply on top, as they would in production.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { statementsOf } from "../helpers/demo-tables";
import { migrations, migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const migration = migrationSql(9);

const execution = (id: string, status: string, from: string | null, at: number) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
                             duplicate_deliveries, last_duplicate_at, started_over_from, created_at, updated_at, finished_at)
     VALUES (?1, 'mig', 'wf', 'v1', 'received', ?2, 'forced', NULL, ?3, '{"order":1}', 2, ?4, ?5, ?4, ?4, ?6)`,
  ).bind(id, from ? "start_over" : "test", status, at, from, status === "RUNNING" ? null : at + 1);

const step = (executionId: string, vertexId: string, state: string, epoch: number) =>
  env.DB.prepare(
    `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, retry_base, available_at, lease_until, idempotency_key,
                        request, output, next_vertices, error, created_at, updated_at, finished_at, resends, next_resend_at)
     VALUES (?1, ?2, 'mig', ?3, ?4, ?4, 0, 10, ?5, ?6, '{"url":"http://localhost:8788/x"}', '{"ok":true}', '[]', ?7, 10, 11, ?8, 1, ?9)`,
  ).bind(
    executionId,
    vertexId,
    state,
    epoch,
    state === "EXECUTING" ? 99 : null,
    `key-${executionId}-${vertexId}`,
    state === "FAILED" ? "boom" : null,
    ["COMPLETED", "FAILED", "SKIPPED"].includes(state) ? 12 : null,
    state === "DISPATCHED" ? 50 : null,
  );

const dump = async (table: string, order: string) =>
  (
    await env.DB.prepare(
      `SELECT * FROM ${table} WHERE ${table === "step_events" ? "execution_id" : "workspace"} LIKE 'm%' ORDER BY ${order}`,
    ).all()
  ).results;

beforeAll(async () => {
  await schemaBefore(9);
  await env.DB.batch([
    execution("m-a", "COMPLETED", null, 1),
    execution("m-b", "FAILED", "m-a", 2),
    execution("m-c", "RUNNING", "m-b", 3),
    execution("m-d", "FAILED", null, 4),
    step("m-a", "charge", "COMPLETED", 1),
    step("m-b", "charge", "FAILED", 3),
    step("m-c", "charge", "EXECUTING", 2),
    step("m-c", "ship", "DISPATCHED", 0),
    step("m-c", "skip", "SKIPPED", 0),
    step("m-d", "charge", "FAILED", 2),
    env.DB.prepare(
      "INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail) VALUES ('m-c', 'charge', 'lease_expired', 1, 5, 'x')",
    ),
    env.DB.prepare(
      "INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail) VALUES ('m-d', 'charge', 'operator_retry', 2, 6, 'y')",
    ),
  ]);
});

describe("migration 0009 on a populated database", () => {
  it("keeps every row and column, links lineages through started_over_from, and the foreign keys hold", async () => {
    const before = {
      executions: await dump("executions", "id"),
      steps: await dump("steps", "execution_id, vertex_id"),
      events: await dump("step_events", "id"),
    };
    const statements = statementsOf(migration);
    expect(statements[0]).toBe("PRAGMA defer_foreign_keys = on");
    await run(migration);

    // Every column as it was, and the lineage the migration derived.
    expect((await dump("executions", "id")).map(({ lineage_id: _lineage, ...row }) => row)).toEqual(before.executions);
    expect(await dump("steps", "execution_id, vertex_id")).toEqual(before.steps);
    expect(await dump("step_events", "id")).toEqual(before.events);
    const lineages = await env.DB.prepare("SELECT id, lineage_id FROM executions WHERE workspace = 'mig' ORDER BY id").all();
    expect(lineages.results).toEqual([
      { id: "m-a", lineage_id: "m-a" },
      { id: "m-b", lineage_id: "m-a" },
      { id: "m-c", lineage_id: "m-a" },
      { id: "m-d", lineage_id: "m-d" },
    ]);
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
    const indexes = await env.DB.prepare(
      `SELECT name FROM sqlite_master
       WHERE type = 'index' AND tbl_name IN ('executions', 'steps', 'step_events') AND sql IS NOT NULL ORDER BY name`,
    ).all<{ name: string }>();
    expect(indexes.results.map((r) => r.name)).toEqual([
      "executions_by_predecessor",
      "executions_by_workflow",
      "executions_by_workspace",
      "executions_live_by_lineage",
      "step_events_by_step",
      "steps_dispatched_due",
      "steps_first_resend_due",
      "steps_lease_expiry",
      "steps_next_resend_due",
    ]);
    expect((await env.DB.prepare("SELECT name FROM sqlite_master WHERE name LIKE '%_0008'").all()).results).toEqual([]);
    for (const m of migrations.filter((m) => m.number > 9)) await run(m.sql);
  });

  it("the rebuilt constraints take CANCELLED and still refuse what they refused", async () => {
    await expect(
      env.DB.prepare("UPDATE steps SET state = 'PAUSED' WHERE execution_id = 'm-c' AND vertex_id = 'ship'").run(),
    ).rejects.toThrow(/CHECK constraint failed/);
    await expect(env.DB.prepare("UPDATE executions SET status = 'CANCELLED' WHERE id = 'm-c'").run()).rejects.toThrow(
      /CHECK constraint failed/, // finished_at must be set with a final status
    );
    await env.DB.prepare("UPDATE executions SET status = 'CANCELLED', finished_at = 9 WHERE id = 'm-c'").run();
    await expect(
      env.DB.prepare(
        `INSERT INTO steps (execution_id, vertex_id, workspace, state, available_at, created_at, created_seq, updated_at)
         VALUES ('nope', 'x', 'mig', 'DISPATCHED', 1, 1, 0, 1)`,
      ).run(),
    ).rejects.toThrow(/FOREIGN KEY constraint failed/);
  });
});
