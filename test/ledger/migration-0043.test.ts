/**
 * migrations/0043 (issue 47 point 2, docs/ledger.md "Rows written per execution"): `steps_by_key` and
 * `work_items_by_key` leave out the row a key's send names (`key_first_send`), and every key send is
 * born kept (`guarded = 1`, `unguarded` marking one with no retention). This file's database is taken
 * back to the schema before 0043, populated — a keyed step and its unguarded send as 0024's trigger
 * wrote it (`guarded = 0`) — and 0043 runs in one batch, as `wrangler d1 migrations apply` runs it.
 * The rows from before keep their index entries and their meaning; the rows after are born kept.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { searchExecutions } from "../../src/ledger";
import { migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const DAY = 86_400_000;

const execution = (id: string) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, lineage_id, created_at, updated_at, max_attempt)
     VALUES (?1, 'mig', 'wf', 'v1', 'received', 'webhook', 'forced', NULL, 'RUNNING', '{}', ?1, 1000, 1000, 1)`,
  ).bind(id);

/** A step claimed at its insert with its key, as the start batch inserts a chained first step (its trigger records the send). */
const keyedStep = (executionId: string, vertexId: string, key: string) =>
  env.DB.prepare(
    `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until, idempotency_key,
                        key_destination, key_guarded, created_at, created_seq, updated_at)
     VALUES (?1, ?2, 'mig', 'EXECUTING', 1, 1, 1000, 9000, ?3, 'https://pay.example', 0, 1000, ?4, 1000)`,
  ).bind(executionId, vertexId, key, vertexId === "charge" ? 0 : 1);

const send = (key: string) =>
  env.DB.prepare(
    `SELECT execution_id AS executionId, guarded, unguarded, retention_ms AS retentionMs FROM destination_key_sends
     WHERE workspace = 'mig' AND idempotency_key = ?1`,
  )
    .bind(key)
    .first();

const found = async (key: string) =>
  (await searchExecutions(env.DB, "mig", { by: "key", keys: [key] }, { limit: 10 })).hits.map((h) =>
    "live" in h ? h.live.id : h.removed.id,
  );

beforeAll(async () => {
  await schemaBefore(43);
  await env.DB.batch([execution("old"), keyedStep("old", "charge", "k-old")]);
  await run(migrationSql(43));
});

describe("migration 0043", () => {
  it("keeps the rows from before as they were: the step in steps_by_key, its send not kept until its execution goes", async () => {
    expect(await send("k-old")).toEqual({ executionId: "old", guarded: 0, unguarded: null, retentionMs: null });
    const step = await env.DB.prepare("SELECT key_first_send AS f FROM steps WHERE execution_id = 'old'").first("f");
    expect(step).toBeNull();
    expect(await found("k-old")).toEqual(["old"]);
    const indexes = await env.DB.prepare(
      "SELECT name, sql FROM sqlite_master WHERE name IN ('steps_by_key', 'work_items_by_key') ORDER BY name",
    ).all<{ name: string; sql: string }>();
    expect(indexes.results.map((i) => i.name)).toEqual(["steps_by_key", "work_items_by_key"]);
    for (const index of indexes.results) expect(index.sql).toContain("key_first_send IS NULL");
  });

  it("a send written after it is born kept; a send from before recorded again unguarded is kept, marked unguarded", async () => {
    await env.DB.batch([execution("new"), keyedStep("new", "charge", "k-new"), keyedStep("new", "again", "k-old")]);
    // The execution's shortest retention (7 days completed, 30 failed and cancelled, the defaults) is its hot hold.
    expect(await send("k-new")).toEqual({ executionId: "new", guarded: 1, unguarded: 1, retentionMs: 7 * DAY });
    expect(await send("k-old")).toEqual({ executionId: "old", guarded: 1, unguarded: 1, retentionMs: 7 * DAY });
    expect((await found("k-old")).sort()).toEqual(["new", "old"]);
  });

  it("a send row that goes gives the step it named its steps_by_key entry back", async () => {
    await env.DB.prepare("UPDATE steps SET key_first_send = 1 WHERE execution_id = 'new' AND vertex_id = 'charge'").run();
    await env.DB.prepare("DELETE FROM destination_key_sends WHERE workspace = 'mig' AND idempotency_key = 'k-new'").run();
    const step = await env.DB.prepare("SELECT key_first_send AS f FROM steps WHERE execution_id = 'new' AND vertex_id = 'charge'").first(
      "f",
    );
    expect(step).toBeNull();
    expect(await found("k-new")).toEqual(["new"]);
  });
});
