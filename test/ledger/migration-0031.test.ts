/**
 * migrations/0031 rebuilds `executions` (three new statuses, the finished rule, the generated
 * `purge_at`), `execution_tombstones` (its status CHECK) and `work_items` (kind 'undo'): docs/steps.md
 * "Compensation". This file's database is taken back to the schema before 0031, populated — a
 * start-over chain with a step (the foreign keys that point at `executions`), a tombstone, a MAP
 * item — and 0031 runs in one batch, as `wrangler d1 migrations apply` runs it. Then every row is
 * back, the foreign keys hold, and the new statuses are accepted where they belong.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const execution = (id: string, status: string, finishedAt: number | null, startedOverFrom: string | null = null) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, lineage_id, started_over_from, created_at, updated_at, finished_at, max_attempt)
     VALUES (?1, 'mig', 'wf', 'v1', 'received', 'webhook', 'forced', NULL, ?2, '{}', ?4, ?3, 1000, 1000, ?5, 3)`,
  ).bind(id, status, startedOverFrom, startedOverFrom === null ? id : "first", finishedAt);

beforeAll(async () => {
  await schemaBefore(31);
  await env.DB.batch([
    execution("first", "FAILED", 2_000),
    execution("second", "RUNNING", null, "first"),
    env.DB.prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, available_at, created_at, updated_at)
       VALUES ('second', 'charge', 'mig', 'DISPATCHED', 1000, 1000, 1000)`,
    ),
    env.DB.prepare(
      `INSERT INTO execution_tombstones
         (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at)
       VALUES ('swept', 'mig', 'wf', 'CANCELLED', 500, 600, 700, 'retention', 0, 9000)`,
    ),
    env.DB.prepare(
      `INSERT INTO work_items
         (execution_id, row_key, vertex_id, kind, item_index, workspace, state, available_at, item, created_at, updated_at)
       VALUES ('second', 'lines#0', 'lines', 'map_item', 0, 'mig', 'PENDING', 1000, '{"sku":"a"}', 1000, 1000)`,
    ),
  ]);
  await run(migrationSql(31));
});

describe("migration 0031", () => {
  it("keeps every row: executions (their links and counters), the step that points at one, the tombstone, the item", async () => {
    const executions = await env.DB.prepare(
      `SELECT id, status, started_over_from, lineage_id, finished_at, max_attempt, purge_at
       FROM executions WHERE workspace = 'mig' ORDER BY id`,
    ).all();
    expect(executions.results).toEqual([
      {
        id: "first",
        status: "FAILED",
        started_over_from: null,
        lineage_id: "first",
        finished_at: 2_000,
        max_attempt: 3,
        purge_at: 2_000 + 2_592_000_000,
      },
      {
        id: "second",
        status: "RUNNING",
        started_over_from: "first",
        lineage_id: "first",
        finished_at: null,
        max_attempt: 3,
        purge_at: null,
      },
    ]);
    expect((await env.DB.prepare("SELECT vertex_id FROM steps WHERE execution_id = 'second'").all()).results).toEqual([
      { vertex_id: "charge" },
    ]);
    expect((await env.DB.prepare("SELECT status FROM execution_tombstones WHERE id = 'swept'").first())?.status).toBe("CANCELLED");
    expect((await env.DB.prepare("SELECT kind FROM work_items WHERE row_key = 'lines#0'").first())?.kind).toBe("map_item");
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
    const steps = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE name = 'steps'").first<{ sql: string }>();
    expect(steps?.sql).toContain("REFERENCES executions(id)");
  });

  it("takes the new statuses: COMPENSATING live (no finish, no purge), the two final ones kept as long as a failure", async () => {
    await env.DB.prepare("UPDATE executions SET status = 'COMPENSATING', finished_at = NULL WHERE id = 'first'").run();
    expect((await env.DB.prepare("SELECT purge_at FROM executions WHERE id = 'first'").first())?.purge_at).toBeNull();
    await expect(env.DB.prepare("UPDATE executions SET finished_at = 5 WHERE id = 'first'").run()).rejects.toThrow(/CHECK/);
    await env.DB.prepare("UPDATE executions SET status = 'COMPENSATED', finished_at = 3000 WHERE id = 'first'").run();
    expect((await env.DB.prepare("SELECT purge_at FROM executions WHERE id = 'first'").first())?.purge_at).toBe(3_000 + 2_592_000_000);
    await expect(env.DB.prepare("UPDATE executions SET status = 'UNDONE' WHERE id = 'first'").run()).rejects.toThrow(/CHECK/);
    await env.DB.prepare(
      `INSERT INTO execution_tombstones
         (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at)
       VALUES ('undone', 'mig', 'wf', 'COMPENSATION_FAILED', 500, 600, 700, 'retention', 0, 9000)`,
    ).run();
    await env.DB.prepare(
      `INSERT INTO work_items
         (execution_id, row_key, vertex_id, kind, item_index, workspace, state, available_at, item, created_at, updated_at)
       VALUES ('first', 'charge#undo#0', 'charge', 'undo', 0, 'mig', 'PENDING', 1000, '{}', 1000, 1000)`,
    ).run();
    // The one-live index covers both live statuses.
    const live = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE name = 'executions_live_by_lineage'").first<{ sql: string }>();
    expect(live?.sql).toContain("'COMPENSATING'");
  });
});
