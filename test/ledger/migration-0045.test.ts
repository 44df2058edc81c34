/**
 * migrations/0045 (issue 47 point 2, src/ledger/entry-step.ts): the entry step has no row; its
 * execution row is that step, with the successors its edges took in `executions.entry_next`. This
 * file's database is taken back to the schema before 0045 and given executions the old way (an entry
 * row, `entry_next` NULL); after 0045 it gets the same executions the new way (no entry row). In
 * each, `c` joins the entry and `a` (entry → a → c, entry → c), a settles without taking its edge
 * to c, and the fan-in decision reads the entry's edge where the execution keeps it: its row, or its
 * execution row.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { settleAndDispatch } from "../../src/ledger";
import { stepsWithEntry } from "../../src/ledger/entry-step";
import { migrationSql, migrationsAfter, runMigration as run, schemaBefore } from "../helpers/migrations";

const execution = (id: string, entryNext: string | null) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, lineage_id, created_at, updated_at, max_attempt${entryNext === null ? "" : ", entry_next"})
     VALUES (?1, 'mig', 'wf', 'v1', 'received', 'webhook', 'forced', NULL, 'RUNNING', '{"order":7}', ?1, 1000, 1000, 1
             ${entryNext === null ? "" : ", ?2"})`,
  ).bind(id, ...(entryNext === null ? [] : [entryNext]));

const entryRow = (id: string, next: string) =>
  env.DB.prepare(
    `INSERT INTO steps (execution_id, vertex_id, workspace, state, available_at, output, next_vertices, created_at, created_seq,
                        updated_at, finished_at)
     VALUES (?1, 'received', 'mig', 'COMPLETED', 1000, '{"order":7}', ?2, 1000, 0, 1000, 1000)`,
  ).bind(id, next);

const running = (id: string, seq: number) =>
  env.DB.prepare(
    `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until, created_at, created_seq,
                        updated_at)
     VALUES (?1, 'a', 'mig', 'EXECUTING', 1, 1, 1000, 90000, 1000, ?2, 1000)`,
  ).bind(id, seq);

const settleA = (id: string) =>
  settleAndDispatch(env.DB, {
    fence: { executionId: id, vertexId: "a", epoch: 1 },
    now: 3000,
    // a takes no edge to c: whether c runs is the entry's edge alone.
    outcome: { state: "COMPLETED", output: "{}", nextVertices: [] },
    request: null,
    backfill: [],
    descendants: [{ vertexId: "c", predecessors: ["received", "a"] }],
  });

const stateOf = (id: string, vertex: string) =>
  env.DB.prepare(`SELECT state FROM ${stepsWithEntry("(?1)")} WHERE vertex_id = ?2`)
    .bind(id, vertex)
    .first<string>("state");

beforeAll(async () => {
  await schemaBefore(45);
  await env.DB.batch([
    execution("old-taken", null),
    entryRow("old-taken", '["a","c"]'),
    running("old-taken", 1),
    execution("old-not", null),
    entryRow("old-not", '["a"]'),
    running("old-not", 1),
  ]);
  await run(migrationSql(45));
  await migrationsAfter(45);
  await env.DB.batch([execution("new-taken", '["a","c"]'), running("new-taken", 0), execution("new-not", '["a"]'), running("new-not", 0)]);
});

describe("migration 0045", () => {
  it("leaves the executions from before as they were: entry_next NULL beside their entry row", async () => {
    const { results } = await env.DB.prepare(
      `SELECT x.id, x.entry_next, (SELECT count(*) FROM steps s WHERE s.execution_id = x.id AND s.vertex_id = 'received') AS rows
       FROM executions x WHERE x.id LIKE 'old-%' ORDER BY x.id`,
    ).all();
    expect(results).toEqual([
      { id: "old-not", entry_next: null, rows: 1 },
      { id: "old-taken", entry_next: null, rows: 1 },
    ]);
  });

  it("a fan-in reads the entry's edge from its row (before 0045) or its execution row: taken → DISPATCHED, not → SKIPPED", async () => {
    for (const id of ["old-taken", "old-not", "new-taken", "new-not"]) expect((await settleA(id)).settled).toBe(true);
    expect(await stateOf("old-taken", "c")).toBe("DISPATCHED");
    expect(await stateOf("new-taken", "c")).toBe("DISPATCHED");
    expect(await stateOf("old-not", "c")).toBe("SKIPPED");
    expect(await stateOf("new-not", "c")).toBe("SKIPPED");
  });

  it("the steps' readers see one entry either way: COMPLETED, epoch 0, its output the payload, first in order", async () => {
    for (const id of ["old-taken", "new-taken"]) {
      const { results } = await env.DB.prepare(
        `SELECT vertex_id, state, epoch, attempt, output FROM ${stepsWithEntry("(?1)")} ORDER BY created_at, created_seq`,
      )
        .bind(id)
        .all();
      expect(results[0]).toEqual({ vertex_id: "received", state: "COMPLETED", epoch: 0, attempt: 0, output: '{"order":7}' });
      expect(results.filter((r) => r.vertex_id === "received")).toHaveLength(1);
    }
  });
});
