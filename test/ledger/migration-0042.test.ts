/**
 * migrations/0042 (issue 47 point 2, docs/steps.md "Every attempt on record"): `step_attempts` is
 * renamed `step_attempt_rows`, a view `step_attempts` shows the rows and the completed attempts
 * held on step rows, and the triggers that read or write attempts are made again. This file's
 * database is taken back to the schema before 0042, populated — a step with a completed attempt row
 * and a step still running with a `running` row opened before migrations/0040 — and 0042 runs in one
 * batch, as `wrangler d1 migrations apply` runs it, then every later migration.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { settleAndDispatch } from "../../src/ledger";
import { migrationSql, migrationsAfter, runMigration as run, schemaBefore } from "../helpers/migrations";

const step = (vertexId: string, state: "COMPLETED" | "EXECUTING", seq: number) =>
  env.DB.prepare(
    `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until, output, next_vertices,
                        created_at, created_seq, updated_at, finished_at)
     VALUES ('old', ?1, 'mig', ?2, 1, 1, 1000, ?3, ?4, ?5, 1000, ?6, 1000, ?7)`,
  ).bind(
    vertexId,
    state,
    state === "EXECUTING" ? 90_000 : null,
    state === "COMPLETED" ? "{}" : null,
    state === "COMPLETED" ? "[]" : null,
    seq,
    state === "COMPLETED" ? 2000 : null,
  );

const attemptRow = (vertexId: string, outcome: "completed" | "running", seq: number) =>
  env.DB.prepare(
    `INSERT INTO step_attempts (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, seq, ev_mark)
     VALUES ('old', ?1, 1, 1, ?2, 1000, ?3, ?4, 0)`,
  ).bind(vertexId, outcome, outcome === "completed" ? 2000 : null, seq);

const attempts = async () =>
  (
    await env.DB.prepare("SELECT vertex_id, outcome, seq FROM step_attempts WHERE execution_id = 'old' ORDER BY seq").all<{
      vertex_id: string;
      outcome: string;
      seq: number;
    }>()
  ).results;

beforeAll(async () => {
  await schemaBefore(42);
  await env.DB.batch([
    env.DB.prepare(
      `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                               payload, lineage_id, created_at, updated_at, max_attempt)
       VALUES ('old', 'mig', 'wf', 'v1', 'received', 'webhook', 'forced', NULL, 'RUNNING', '{}', 'old', 1000, 1000, 1)`,
    ),
    step("a", "COMPLETED", 0),
    step("b", "EXECUTING", 1),
    attemptRow("a", "completed", 1),
    attemptRow("b", "running", 2),
  ]);
  await run(migrationSql(42));
  await migrationsAfter(42);
});

describe("migration 0042", () => {
  it("keeps every attempt row, under the new table's name and through the view", async () => {
    expect(await attempts()).toEqual([
      { vertex_id: "a", outcome: "completed", seq: 1 },
      { vertex_id: "b", outcome: "running", seq: 2 },
    ]);
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM step_attempt_rows WHERE execution_id = 'old'").first("n");
    expect(rows).toBe(2);
    const kinds = await env.DB.prepare("SELECT name, type FROM sqlite_master WHERE name LIKE 'step_attempt%' ORDER BY name").all();
    expect(kinds.results).toEqual([
      { name: "step_attempt_rows", type: "table" },
      { name: "step_attempts", type: "view" },
    ]);
  });

  it("a running row opened before 0040 is closed as a row by the COMPLETED settle; the step row then holds no attempt", async () => {
    const result = await settleAndDispatch(env.DB, {
      fence: { executionId: "old", vertexId: "b", epoch: 1 },
      now: 3000,
      outcome: { state: "COMPLETED", output: "{}", nextVertices: [] },
      request: null,
      backfill: [],
      descendants: [],
    });
    expect(result.settled).toBe(true);
    expect(await attempts()).toEqual([
      { vertex_id: "a", outcome: "completed", seq: 1 },
      { vertex_id: "b", outcome: "completed", seq: 3 },
    ]);
    const onStep = await env.DB.prepare("SELECT att_seq FROM steps WHERE execution_id = 'old' AND vertex_id = 'b'").first("att_seq");
    expect(onStep).toBeNull();
  });
});
