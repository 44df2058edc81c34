/**
 * Where a workspace's requests go: its shard's env, after two checks kept per isolate.
 *
 * - The shard's schema is current (./schema.ts).
 * - The placement fence: shard 0 records the shard each workspace was first used on
 *   (`workspace_placements`). A map that places a workspace elsewhere than its record — an edit
 *   that moved it without its data — would split its dedupe across two databases (double starts,
 *   double sends to keyless destinations), so that workspace answers 503 `workspace-misplaced`
 *   until the map is restored or a completed move is recorded (docs/shards.md "Move a workspace").
 *
 * A passed fence is kept per isolate per var value, so the cost is one statement pair on shard 0
 * the first time an isolate serves a workspace; a failed one is asked again after `RECHECK_MS`.
 * Only a recorded workspace is kept: the public routes read the record of any name anyone sends,
 * and a name without a record is never kept, so junk names can neither fill the cache nor evict
 * real workspaces from it.
 *
 * Cron applies the same fence before it starts a schedule (`scheduleRefusal`): a workspace frozen
 * for a move starts nothing on the shard the map now names.
 */
import { ProblemError } from "../lib/problem";
import { databaseOf, shardConfig, shardOf, type ShardConfig } from "./config";
import { shardProblems } from "./problems";
import { shardSchemaReady } from "./schema";
import { shardEnv, workerEnv, type ShardEnv } from "./shard-env";

const RECHECK_MS = 5_000;
/**
 * Recorded workspaces whose fence was checked, per var value; cleared when full (each entry costs
 * one check to regain). Only names with a record on shard 0 get here — created by an authenticated
 * request or by cron — never a name an anonymous caller made up.
 */
export const MAX_REMEMBERED = 10_000;

type Fence = { ok: true } | { ok: false; until: number; error: unknown };
let fences: { key: string; entries: Map<string, Fence> } = { key: "", entries: new Map() };

export interface PlaceOptions {
  /**
   * Record a workspace seen for the first time (default). The public routes (hooks, event
   * deliveries) do not: anyone may name any workspace there, and a name must become neither a row
   * nor an entry of this isolate's cache. They read the record, fenced.
   */
  record?: boolean;
  now?: number;
}

/** The env of `workspace`'s shard, once its schema and placement are known good; else the 503 that says why. */
export async function placeWorkspace(
  env: Env,
  workspace: string,
  { record = true, now = Date.now() }: PlaceOptions = {},
): Promise<ShardEnv> {
  const worker = workerEnv(env);
  const config = shardConfig(worker);
  const shard = shardOf(config, workspace);
  await Promise.all([ready(worker, config, shard, now), fence(worker, config, workspace, shard, now, record)]);
  return shardEnv(worker, shard);
}

/** Shard `shard` has every migration this version needs (checked once per isolate). */
export function ready(worker: Env, config: ShardConfig, shard: number, now = Date.now()): Promise<void> {
  return shardSchemaReady(databaseOf(worker, config, shard), config.bindings[shard]!, shard, now);
}

async function fence(worker: Env, config: ShardConfig, workspace: string, shard: number, now: number, record: boolean): Promise<void> {
  if (fences.key !== config.key) fences = { key: config.key, entries: new Map() };
  const known = fences.entries.get(workspace);
  if (known?.ok) return;
  if (known && now < known.until) throw known.error;
  // The placements record lives on shard 0: it must have the table before it can fence.
  await ready(worker, config, 0, now);
  const recorded = record ? await recordPlacement(worker, config, workspace, shard, now) : await readPlacement(worker, config, workspace);
  // Unrecorded and not recording (a public route): nothing says the data is elsewhere, and the route
  // finds its workflow or source only where the map points — it can start nothing on a shard
  // holding none. Nothing is kept: the next request reads the record again (a record made
  // meanwhile by another isolate fences it at once), and a made-up name takes no place in the cache.
  if (recorded === null) return;
  if (fences.entries.size >= MAX_REMEMBERED) fences.entries.clear();
  if (recorded === shard) {
    fences.entries.set(workspace, { ok: true });
    return;
  }
  const error = shardProblems.workspaceMisplaced(workspace, shard, recorded);
  fences.entries.set(workspace, { ok: false, until: now + RECHECK_MS, error });
  throw error;
}

/**
 * Why cron must not start `workspace`'s schedules on shard `shard`, or null when it may: the map
 * places the workspace there and the fence the HTTP routes use passes (recording a workspace seen
 * for the first time, as they do). A frozen workspace — the map moved, the record not yet — starts
 * nothing on the shard the map names, whatever rows were copied there. Throws what is not an
 * answer (a database error): the run is then retried like any failed start.
 */
export async function scheduleRefusal(env: Env, workspace: string, shard: number, now = Date.now()): Promise<string | null> {
  const worker = workerEnv(env);
  const config = shardConfig(worker);
  if (shardOf(config, workspace) !== shard) return `workspace "${workspace}" is placed on another shard (WORKSPACE_SHARDS)`;
  try {
    await fence(worker, config, workspace, shard, now, true);
    return null;
  } catch (error) {
    if (!(error instanceof ProblemError) || error.code !== "workspace-misplaced") throw error;
    const { recorded } = error.extensions;
    return (
      `workspace "${workspace}" is fenced: WORKSPACE_SHARDS places it on shard ${shard}, its data is recorded on shard ${recorded} ` +
      `(a move under way, docs/shards.md "Move a workspace")`
    );
  }
}

/** Tests: how many workspaces this isolate's fence remembers. */
export function rememberedPlacements(): number {
  return fences.entries.size;
}

/**
 * The workspace's recorded shard. A workspace seen for the first time is recorded where its data
 * already is, if any shard holds rows of it (a workspace that predates the placements record and
 * was placed elsewhere before its first use is fenced, not silently split), else on `shard`.
 * At most one round trip per shard, the first time only.
 */
export async function recordPlacement(worker: Env, config: ShardConfig, workspace: string, shard: number, now: number): Promise<number> {
  const existing = await readPlacement(worker, config, workspace);
  if (existing !== null) return existing;
  const shard0 = databaseOf(worker, config, 0);
  const holding = await shardsHolding(worker, config, workspace);
  const where = holding.length === 0 || holding.includes(shard) ? shard : holding[0]!;
  const [, read] = await shard0.batch<{ shard: number }>([
    shard0
      .prepare("INSERT INTO workspace_placements (workspace, shard, placed_at) VALUES (?1, ?2, ?3) ON CONFLICT (workspace) DO NOTHING")
      .bind(workspace, where, now),
    shard0.prepare("SELECT shard FROM workspace_placements WHERE workspace = ?1").bind(workspace),
  ]);
  return read?.results[0]?.shard ?? where;
}

/** The workspace's recorded shard, or null when it has none yet. */
export function readPlacement(worker: Env, config: ShardConfig, workspace: string): Promise<number | null> {
  return databaseOf(worker, config, 0)
    .prepare("SELECT shard FROM workspace_placements WHERE workspace = ?1")
    .bind(workspace)
    .first<number>("shard");
}

/** The workspace's rows in the small tables that every workspace writes first (never a scan of executions). */
export const HOLDS_WORKSPACE_SQL =
  "SELECT EXISTS (SELECT 1 FROM workflows WHERE workspace = ?1) OR EXISTS (SELECT 1 FROM workspace_secrets WHERE workspace = ?1) " +
  "OR EXISTS (SELECT 1 FROM idempotency_keys WHERE principal = ?1) AS holds";

/** The shards holding rows of `workspace`, in shard order. */
export async function shardsHolding(worker: Env, config: ShardConfig, workspace: string): Promise<number[]> {
  const found = await Promise.all(
    config.bindings.map((_, shard) =>
      databaseOf(worker, config, shard).prepare(HOLDS_WORKSPACE_SQL).bind(workspace).first<number>("holds"),
    ),
  );
  return found.flatMap((holds, shard) => (holds ? [shard] : []));
}

/** Tests: forget every fence and schema check kept by this isolate. */
export function forgetPlacements(): void {
  fences = { key: "", entries: new Map() };
}
