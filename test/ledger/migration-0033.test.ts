/**
 * migrations/0033 (issue 47 point 2, docs/ledger.md "Rows written per execution"): no table rebuild —
 * it drops `destination_key_sends_unguarded` and `identity_values_by_execution`, leaves COMPLETED
 * out of `executions_by_status`, and gives executions and tombstones their business values' hashes.
 * This file's database is taken back to the schema before 0033 and populated (a kept execution and a
 * tombstone, each with its values), 0033 runs in one batch as `wrangler d1 migrations apply` runs it,
 * and the hashes are filled from the values, so the tombstone's expiry still takes its values.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const H = (c: string) => c.repeat(64);

beforeAll(async () => {
  await schemaBefore(33);
  await env.DB.batch([
    env.DB.prepare(
      `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                               payload, lineage_id, created_at, updated_at, finished_at)
       VALUES ('kept', 'mig', 'wf', 'v1', 'received', 'webhook', 'fields', ?1, 'COMPLETED', '{}', ?1, 1000, 1000, 2000)`,
    ).bind(H("a")),
    env.DB.prepare(
      `INSERT INTO execution_tombstones
         (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at)
       VALUES ('swept', 'mig', 'wf', 'COMPLETED', 500, 600, 700, 'retention', 0, 9000)`,
    ),
    ...[
      [H("1"), 1000, "kept"],
      [H("2"), 1000, "kept"],
      [H("3"), 500, "swept"],
    ].map((v) =>
      env.DB.prepare("INSERT INTO identity_values (workspace, value_hash, created_at, execution_id) VALUES ('mig', ?1, ?2, ?3)").bind(...v),
    ),
  ]);
  await run(migrationSql(33));
});

describe("migration 0033", () => {
  it("fills the hashes of the kept execution and of the tombstone from their values; the indexes are gone or narrowed", async () => {
    const kept = await env.DB.prepare("SELECT value_hashes AS v FROM executions WHERE id = 'kept'").first<{ v: string }>();
    expect(JSON.parse(kept!.v).sort()).toEqual([H("1"), H("2")]);
    const swept = await env.DB.prepare("SELECT value_hashes AS v FROM execution_tombstones WHERE id = 'swept'").first<{ v: string }>();
    expect(JSON.parse(swept!.v)).toEqual([H("3")]);
    const indexes = (await env.DB.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index'").all<{ name: string; sql: string }>())
      .results;
    const names = indexes.map((i) => i.name);
    expect(names).not.toContain("identity_values_by_execution");
    expect(names).not.toContain("destination_key_sends_unguarded");
    expect(indexes.find((i) => i.name === "executions_by_status")?.sql).toContain("WHERE status <> 'COMPLETED'");
  });

  it("a tombstone's expiry still takes its values (by their primary keys), and only its own", async () => {
    await env.DB.prepare("DELETE FROM execution_tombstones WHERE id = 'swept'").run();
    const left = await env.DB.prepare("SELECT execution_id AS id FROM identity_values WHERE workspace = 'mig' ORDER BY value_hash").all();
    expect(left.results).toEqual([{ id: "kept" }, { id: "kept" }]);
  });
});
