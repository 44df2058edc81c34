/**
 * migrations/0038 rebuilds `steps` WITHOUT ROWID (issue 47 point 2: one index entry less per step)
 * and numbers each execution's steps in `created_seq`, the tie-break of steps created in the same
 * millisecond that `rowid` was. This file's database is taken back to the schema before 0038,
 * populated — two executions, one with three steps created in the same millisecond in an order that
 * is not their ids' order, a step's attempt and its key's first send (the rows the triggers of
 * `steps` write) — and 0038 runs in one batch, as `wrangler d1 migrations apply` runs it. Then every
 * row is back in its insertion order, the foreign keys hold, and the triggers of `steps` still fire.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { migrationSql, runMigration as run, schemaBefore } from "../helpers/migrations";

const execution = (id: string) =>
  env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, lineage_id, created_at, updated_at, max_attempt)
     VALUES (?1, 'mig', 'wf', 'v1', 'received', 'webhook', 'forced', NULL, 'RUNNING', '{}', ?1, 1000, 1000, 1)`,
  ).bind(id);

const step = (executionId: string, vertexId: string, state = "DISPATCHED") =>
  env.DB.prepare(
    `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until, created_at, updated_at)
     VALUES (?1, ?2, 'mig', ?3, ?4, ?4, 1000, ?5, 1000, 1000)`,
  ).bind(executionId, vertexId, state, state === "EXECUTING" ? 1 : 0, state === "EXECUTING" ? 9000 : null);

beforeAll(async () => {
  await schemaBefore(38);
  await env.DB.batch([
    execution("one"),
    execution("two"),
    step("one", "zeta"),
    step("two", "only"),
    step("one", "alpha", "EXECUTING"),
    step("one", "mid"),
  ]);
  await run(migrationSql(38));
});

describe("migration 0038", () => {
  it("keeps every step, numbered in its execution in the order it was inserted (the old rowid order)", async () => {
    const { results } = await env.DB.prepare(
      "SELECT execution_id, vertex_id, state, epoch, created_seq FROM steps ORDER BY execution_id, created_at, created_seq",
    ).all();
    expect(results).toEqual([
      { execution_id: "one", vertex_id: "zeta", state: "DISPATCHED", epoch: 0, created_seq: 0 },
      { execution_id: "one", vertex_id: "alpha", state: "EXECUTING", epoch: 1, created_seq: 1 },
      { execution_id: "one", vertex_id: "mid", state: "DISPATCHED", epoch: 0, created_seq: 2 },
      { execution_id: "two", vertex_id: "only", state: "DISPATCHED", epoch: 0, created_seq: 0 },
    ]);
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
    const table = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE name = 'steps'").first<{ sql: string }>();
    expect(table?.sql).toContain("WITHOUT ROWID");
    expect(table?.sql).toContain("REFERENCES executions(id)");
    // The claimed step's attempt, written by `steps_claimed_at_insert` before the rebuild, is still there.
    const attempts = await env.DB.prepare("SELECT vertex_id, outcome FROM step_attempts WHERE execution_id = 'one'").all();
    expect(attempts.results).toEqual([{ vertex_id: "alpha", outcome: "running" }]);
  });

  it("makes every index and trigger of `steps` again, and no automatic key index", async () => {
    const { results } = await env.DB.prepare(
      "SELECT type, name FROM sqlite_master WHERE tbl_name = 'steps' AND type IN ('index', 'trigger') ORDER BY type, name",
    ).all<{ type: string; name: string }>();
    expect(results.map((o) => `${o.type} ${o.name}`)).toEqual([
      "index steps_by_key",
      "index steps_first_resend_due",
      "index steps_lease_expiry",
      "index steps_next_resend_due",
      "index steps_parked",
      "trigger steps_claimed_at_insert",
      "trigger steps_failure_cancels_new_wait",
      "trigger steps_failure_cancels_parked",
      "trigger steps_key_sent_at_insert",
      "trigger steps_parked_cancelled_attempt",
      "trigger steps_parked_cancelled_event",
    ]);
  });

  it("and they fire on the new table: a claimed, keyed insert writes its attempt and its key's first send", async () => {
    await env.DB.prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until, idempotency_key,
                          key_destination, key_guarded, created_at, created_seq, updated_at)
       VALUES ('two', 'charge', 'mig', 'EXECUTING', 1, 1, 2000, 9000, 'order-7', 'pay.example', 1, 2000, 1, 2000)`,
    ).run();
    const attempt = await env.DB.prepare("SELECT outcome, idempotency_key FROM step_attempts WHERE vertex_id = 'charge'").first();
    expect(attempt).toEqual({ outcome: "running", idempotency_key: "order-7" });
    const send = await env.DB.prepare(
      "SELECT destination, first_sent_at, guarded FROM destination_key_sends WHERE idempotency_key = 'order-7'",
    ).first();
    expect(send).toEqual({ destination: "pay.example", first_sent_at: 2000, guarded: 1 });
  });
});
