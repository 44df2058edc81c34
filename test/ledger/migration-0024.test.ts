/**
 * migrations/0024 moves each execution's duplicates from `duplicate_triggers` into its row's
 * `duplicate_log`, rebuilds `execution_identities` WITHOUT ROWID (its duplicate counters go, its
 * claims stay) and adds the start batch's triggers. This file's database (storage is per test file)
 * is taken back to the schema of 0023 — every table dropped, 0001–0023 applied — and populated;
 * then 0024 runs in one batch, as `wrangler d1 migrations apply` runs it.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { readTraceRecordsForSet } from "../../src/ledger/trace-reads";
import { migrationSql, migrationsAfter, runMigration as run, schemaBefore } from "../helpers/migrations";

const migration = migrationSql(24);
const IDENTITY = "a".repeat(64);

beforeAll(async () => {
  await schemaBefore(24);
  const execution = (id: string, duplicates: number) =>
    env.DB.prepare(
      `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                               payload, duplicate_deliveries, last_duplicate_at, lineage_id, created_at, updated_at, finished_at)
       VALUES (?1, 'mig', 'wf', 'v1', 'received', 'webhook', 'fields', ?2, 'COMPLETED', '{}', ?3, ?4, ?1, 1, 2, 2)`,
    ).bind(id, id === "m-dup" ? IDENTITY : "b".repeat(64), duplicates, duplicates > 0 ? 9 : null);
  const duplicate = (seq: number, kind: string) =>
    env.DB.prepare(
      "INSERT INTO duplicate_triggers (execution_id, seq, at, trigger_kind, identity_kind) VALUES ('m-dup', ?1, ?2, ?3, 'fields')",
    ).bind(seq, 100 + seq, kind);
  await env.DB.batch([
    execution("m-dup", 3),
    execution("m-none", 0),
    // Out of order on purpose: the log is ordered by seq.
    duplicate(2, "schedule"),
    duplicate(1, "webhook"),
    duplicate(3, "webhook"),
    env.DB.prepare(
      `INSERT INTO execution_identities (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at,
                                         duplicate_deliveries, last_duplicate_at, previous_execution_id)
       VALUES (?1, 'mig', 'wf', 'm-dup', 'token-1', 1, 1000, 3, 9, NULL)`,
    ).bind(IDENTITY),
  ]);
  await run(migration);
});

describe("migration 0024 on a populated database", () => {
  it("moves each execution's duplicates into its duplicate_log, in order, and drops duplicate_triggers", async () => {
    const rows = await env.DB.prepare("SELECT id, duplicate_deliveries AS n, duplicate_log AS log FROM executions ORDER BY id").all<{
      id: string;
      n: number;
      log: string | null;
    }>();
    expect(rows.results.map((r) => ({ ...r, log: r.log === null ? null : JSON.parse(r.log) }))).toEqual([
      {
        id: "m-dup",
        n: 3,
        log: [
          [1, 101, "webhook", "fields"],
          [2, 102, "schedule", "fields"],
          [3, 103, "webhook", "fields"],
        ],
      },
      { id: "m-none", n: 0, log: null },
    ]);
    const table = await env.DB.prepare("SELECT name FROM sqlite_master WHERE name = 'duplicate_triggers'").all();
    expect(table.results).toEqual([]);
  });

  it("keeps every identity claim (WITHOUT ROWID, its duplicate counters gone): a trigger in its window stays a duplicate", async () => {
    const identity = await env.DB.prepare("SELECT * FROM execution_identities WHERE identity = ?1").bind(IDENTITY).first();
    expect(identity).toEqual({
      identity: IDENTITY,
      workspace: "mig",
      workflow_id: "wf",
      execution_id: "m-dup",
      claim_token: "token-1",
      window_start: 1,
      expires_at: 1000,
      previous_execution_id: null,
      value_hashes: null,
    });
    const sql = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE name = 'execution_identities'").first<{ sql: string }>();
    expect(sql!.sql).toMatch(/WITHOUT ROWID$/);
    const indexes = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'execution_identities' AND sql IS NOT NULL",
    ).all<{
      name: string;
    }>();
    expect(indexes.results.map((r) => r.name)).toEqual(["execution_identities_expiry"]);
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
  });

  it("the trace lists them as it did from the table, once every later migration has run", async () => {
    await migrationsAfter(24);
    // number, time, how they came, what made them the same
    const traces = await readTraceRecordsForSet(env.DB, [{ id: "m-dup", workspace: "mig" }]);
    expect(traces.get("m-dup")!.duplicateTriggers).toEqual([
      { seq: 1, at: 101, triggerKind: "webhook", identityKind: "fields" },
      { seq: 2, at: 102, triggerKind: "schedule", identityKind: "fields" },
      { seq: 3, at: 103, triggerKind: "webhook", identityKind: "fields" },
    ]);
  });
});
