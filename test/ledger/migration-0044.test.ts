/**
 * migrations/0044 (issue 47 point 2, docs/ledger.md "Rows written per execution"): `executions`
 * rebuilt WITHOUT ROWID. This file's database is taken back to the schema before 0044, populated —
 * a finished execution with its steps, a start over pointing at it, a compensation marked resolved
 * (its foreign key cascades on delete: the rebuild's drop would take it) — and 0044 runs in one
 * batch, as `wrangler d1 migrations apply` runs it.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const execution = (id: string, status: string, extra: { from?: string; lineage?: string; finishedAt?: number | null } = {}) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, started_over_from, lineage_id, created_at, updated_at, finished_at, duplicate_deliveries,
                             duplicate_log, value_hashes, sweep_held_until)
     VALUES (?1, 'mig', 'wf', 'v1', 'received', 'webhook', 'forced', NULL, ?2, '{"order":1}', ?3, ?4, 1000, 2000, ?5, 2,
             '[[1,1500,"webhook","fields"]]', '["h1"]', 9000)`,
  ).bind(id, status, extra.from ?? null, extra.lineage ?? id, extra.finishedAt === undefined ? 2000 : extra.finishedAt);

/** Every column of the table (the generated `purge_at` too), for a before-and-after comparison. */
const everyRow = async () => (await env.DB.prepare("SELECT *, purge_at FROM executions ORDER BY id").all()).results;

/** The indexes and triggers of `executions` by name and SQL text, the automatic key index left out. */
const objects = async () =>
  (
    await env.DB.prepare(
      `SELECT type, name, sql FROM sqlite_master
       WHERE tbl_name = 'executions' AND type <> 'table' AND name NOT LIKE 'sqlite_autoindex_%' ORDER BY name`,
    ).all()
  ).results;

let before: Record<string, unknown>[] = [];
let objectsBefore: Record<string, unknown>[] = [];

beforeAll(async () => {
  await schemaBefore(44);
  await env.DB.batch([
    execution("old", "COMPENSATION_FAILED"),
    execution("next", "RUNNING", { from: "old", lineage: "lin", finishedAt: null }),
    env.DB.prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, available_at, output, next_vertices, created_at, created_seq,
                          updated_at, finished_at)
       VALUES ('old', 'received', 'mig', 'COMPLETED', 1000, '{"order":1}', '[]', 1000, 0, 1000, 1000)`,
    ),
    env.DB.prepare(
      `INSERT INTO compensation_resolutions (execution_id, workspace, resolved_by, note, failed_undo, resolved_at)
       VALUES ('old', 'mig', 'ops', 'refunded by hand', 'charge#undo#0', 3000)`,
    ),
  ]);
  before = await everyRow();
  objectsBefore = await objects();
  await run(migrationSql(44));
});

describe("migration 0044", () => {
  it("keeps every execution, every column as it was, in a table WITHOUT ROWID with no automatic key index", async () => {
    expect(await everyRow()).toEqual(before);
    const table = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE name = 'executions'").first<string>("sql");
    expect(table).toMatch(/\) WITHOUT ROWID$/);
    const autoindex = await env.DB.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'sqlite_autoindex_executions_1'").first(
      "n",
    );
    expect(autoindex).toBe(0);
  });

  it("makes every index and trigger of the table again, as they were", async () => {
    expect(await objects()).toEqual(objectsBefore);
    expect(objectsBefore.length).toBe(16);
  });

  it("keeps the compensation resolution the drop's cascade took, and the steps' parent", async () => {
    const resolution = await env.DB.prepare("SELECT note, failed_undo FROM compensation_resolutions WHERE execution_id = 'old'").first();
    expect(resolution).toEqual({ note: "refunded by hand", failed_undo: "charge#undo#0" });
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
    const step = await env.DB.prepare(
      "SELECT e.status FROM steps s JOIN executions e ON e.id = s.execution_id WHERE s.vertex_id = 'received'",
    ).first("status");
    expect(step).toBe("COMPENSATION_FAILED");
  });

  it("an execution inserted now writes one row less (its row is its key), and the indexes still answer", async () => {
    const insert = await env.DB.prepare(
      `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, status, payload,
                               lineage_id, created_at, updated_at)
       VALUES ('new', 'mig', 'wf', 'v1', 'received', 'webhook', 'forced', 'RUNNING', '{}', 'new', 4000, 4000)`,
    ).run();
    // The row and its entries in executions_by_workspace, _by_workflow, _by_status and _live_by_lineage.
    expect(insert.meta.rows_written).toBe(5);
    const live = await env.DB.prepare(
      "SELECT id FROM executions WHERE lineage_id IN ('lin', 'new') AND status IN ('RUNNING', 'COMPENSATING') ORDER BY id",
    ).all();
    expect(live.results).toEqual([{ id: "new" }, { id: "next" }]);
    const successor = await env.DB.prepare("SELECT id FROM executions WHERE started_over_from = 'old'").first("id");
    expect(successor).toBe("next");
  });
});
