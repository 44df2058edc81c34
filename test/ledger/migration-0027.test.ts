/**
 * migrations/0027 rebuilds `identity_values` with its execution's `created_at` in the primary key
 * (the search pages a value by it: src/ledger/search.ts). This file's database is taken back to the
 * schema before 0027, populated — a kept execution, one the sweep removed (its tombstone), a row
 * naming neither — and 0027 runs in one batch, as `wrangler d1 migrations apply` runs it. Then the
 * two triggers it made again still do their jobs.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const H1 = "1".repeat(64);
const H2 = "2".repeat(64);

const execution = (id: string, createdAt: number, identity: string | null = null) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, lineage_id, created_at, updated_at, finished_at)
     VALUES (?1, 'mig', 'wf', 'v1', 'received', 'webhook', ?4, ?2, 'COMPLETED', '{}', ?1, ?3, ?3, ?3)`,
  ).bind(id, identity, createdAt, identity === null ? "forced" : "fields");

const rows = async () =>
  (
    await env.DB.prepare(
      "SELECT value_hash, created_at, execution_id FROM identity_values WHERE workspace = 'mig' ORDER BY execution_id, value_hash",
    ).all()
  ).results;

beforeAll(async () => {
  await schemaBefore(27);
  const value = (hash: string, executionId: string) =>
    env.DB.prepare("INSERT INTO identity_values (workspace, value_hash, execution_id) VALUES ('mig', ?1, ?2)").bind(hash, executionId);
  await env.DB.batch([
    execution("kept", 1_000),
    env.DB.prepare(
      `INSERT INTO execution_tombstones
         (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at)
       VALUES ('swept', 'mig', 'wf', 'COMPLETED', 500, 600, 700, 'retention', 0, 9000)`,
    ),
    value(H1, "kept"),
    value(H2, "kept"),
    value(H1, "swept"),
    value(H1, "nothing"),
  ]);
  await run(migrationSql(27));
});

describe("migration 0027", () => {
  it("dates every row with its execution's creation (or its tombstone's) and drops a row naming neither", async () => {
    expect(await rows()).toEqual([
      { value_hash: H1, created_at: 1_000, execution_id: "kept" },
      { value_hash: H2, created_at: 1_000, execution_id: "kept" },
      { value_hash: H1, created_at: 500, execution_id: "swept" },
    ]);
  });

  it("the execution insert's trigger writes the new rows dated, and the tombstone's expiry still deletes them", async () => {
    const identity = "f".repeat(64);
    await env.DB.batch([
      env.DB.prepare(
        `INSERT INTO execution_identities
           (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at, value_hashes)
         VALUES (?1, 'mig', 'wf', 'fresh', 'token', 1, 99999, ?2)`,
      ).bind(identity, JSON.stringify([H2])),
      execution("fresh", 2_000, identity),
    ]);
    expect(await rows()).toContainEqual({ value_hash: H2, created_at: 2_000, execution_id: "fresh" });
    await env.DB.prepare("DELETE FROM execution_tombstones WHERE id = 'swept'").run();
    expect((await rows()).map((r) => r.execution_id)).toEqual(["fresh", "kept", "kept"]);
  });
});
