/**
 * What the stats tests share: a workspace placed on a shard with one workflow, executions moved to
 * a chosen hour (the rollup counts executions by the hour they were created in), the passes' marks
 * set by hand, and a workspace's rollup rows read back.
 */
import { env } from "cloudflare:test";
import { expect } from "vitest";
import { HOUR_MS } from "../../src/ledger";
import { ONE_STEP, placedWorkspace, type PlacedWorkspace } from "../helpers/placed-workspace";
import { deliveredEnv } from "../helpers/shards";

export { HOUR_MS };
export const MINUTE_MS = 60_000;

/** The Worker's env (in project shard-0 the test's `env` is it). */
export const real = deliveredEnv(env);

/** The database of shard `shard`. */
export const shardDb = (shard: number): D1Database => (shard === 0 ? real.DB : real.DB_1);

/** A workspace on `shard` with the one-step workflows `workflowIds` saved. */
export async function statsWorkspace(prefix: string, shard: 0 | 1 = 0, workflowIds: string[] = ["wf"]): Promise<PlacedWorkspace> {
  const w = placedWorkspace(prefix, shard);
  for (const id of workflowIds) expect((await w.call("PUT", `/v1/workflows/${id}`, { id, ...ONE_STEP })).status).toBe(201);
  return w;
}

/** Triggers `workflowId` with `payload`; answers the execution id (a duplicate answers the first one's). */
export async function trigger(w: PlacedWorkspace, workflowId: string, payload: unknown): Promise<string> {
  const res = await w.call("POST", `/v1/workflows/${workflowId}/trigger`, payload);
  expect(res.status).toBeLessThan(300);
  return (await res.json<{ executionId: string }>()).executionId;
}

/** Moves every execution of `w` to `hour` (+ a minute per execution, in creation order), as if created then. */
export async function createdIn(w: PlacedWorkspace, hour: number, ids?: string[]): Promise<void> {
  const db = shardDb(w.shard);
  const filter = ids ? "AND id IN (SELECT value FROM json_each(?2))" : "";
  // Creation order read first (`executions` has no rowid since migrations/0044: created_at, then id), then each moved by its place.
  const { results } = await db
    .prepare(`SELECT id FROM executions WHERE workspace = ?1 ${filter} ORDER BY created_at, id`)
    .bind(w.workspace, ...(ids ? [JSON.stringify(ids)] : []))
    .all<{ id: string }>();
  await db
    .prepare(
      `UPDATE executions SET created_at = ?2 + 60000 * (SELECT j.key FROM json_each(?3) j WHERE j.value = executions.id)
       WHERE workspace = ?1 AND id IN (SELECT value FROM json_each(?3))`,
    )
    .bind(w.workspace, hour, JSON.stringify(results.map((r) => r.id)))
    .run();
}

/** Sets every pass's mark on `db` to `hour` (the rollup then starts there), or clears them (`null`). */
export async function setMarks(db: D1Database, hour: number | null): Promise<void> {
  await db.prepare("DELETE FROM stats_rollup_marks").run();
  if (hour === null) return;
  await db
    .prepare("INSERT INTO stats_rollup_marks (pass, next_hour) VALUES ('closed', ?1), ('settled', ?1), ('final', ?1)")
    .bind(hour)
    .run();
}

/** Each pass's mark on `db`. */
export async function marksOf(db: D1Database): Promise<Record<string, number>> {
  const { results } = await db.prepare("SELECT pass, next_hour FROM stats_rollup_marks").all<{ pass: string; next_hour: number }>();
  return Object.fromEntries(results.map((r) => [r.pass, r.next_hour]));
}

export interface RollupRow {
  workflow_id: string;
  hour: number;
  executions: number;
  duplicate_triggers: number;
  redeliveries_stopped: number;
  fenced_out_writes: number;
  destination_replays: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
  events_received: number;
  duplicate_events: number;
}

/** `workspace`'s rollup rows on `db`, by workflow then hour, without `rolled_at` (the one member a re-roll moves). */
export async function rollupRows(db: D1Database, workspace: string): Promise<RollupRow[]> {
  const { results } = await db
    .prepare(
      `SELECT workflow_id, hour, executions, duplicate_triggers, redeliveries_stopped, fenced_out_writes, destination_replays,
              running, completed, failed, cancelled, events_received, duplicate_events
       FROM stats_hourly WHERE workspace = ?1 ORDER BY workflow_id, hour`,
    )
    .bind(workspace)
    .all<RollupRow>();
  return results;
}

/** A rollup row: zeros but what `counts` says. */
export function row(workflowId: string, hour: number, counts: Partial<Omit<RollupRow, "workflow_id" | "hour">>): RollupRow {
  return {
    workflow_id: workflowId,
    hour,
    executions: 0,
    duplicate_triggers: 0,
    redeliveries_stopped: 0,
    fenced_out_writes: 0,
    destination_replays: 0,
    running: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
    events_received: 0,
    duplicate_events: 0,
    ...counts,
  };
}
