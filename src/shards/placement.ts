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
 */
import { databaseOf, shardConfig, shardOf, type ShardConfig } from "./config";
import { shardProblems } from "./problems";
import { shardSchemaReady } from "./schema";
import { shardEnv, workerEnv, type ShardEnv } from "./shard-env";

const RECHECK_MS = 5_000;
/** How long the hook route trusts "no record yet" before reading the record again. */
const UNRECORDED_RECHECK_MS = 60_000;
/** Workspaces whose fence passed, per var value; cleared when full (each entry costs one check to regain). */
const MAX_REMEMBERED = 10_000;

/**
 * `recorded: false`: read by the hook route, no record yet — a recording request still records it,
 * and the hook route reads it again after `until` (a record made meanwhile by another isolate).
 */
type Fence = { ok: true; recorded: true } | { ok: true; recorded: false; until: number } | { ok: false; until: number; error: unknown };
let fences: { key: string; entries: Map<string, Fence> } = { key: "", entries: new Map() };

export interface PlaceOptions {
  /**
   * Record a workspace seen for the first time (default). The public hook route does not: anyone
   * may name any workspace there, and a name must not become a row. It reads the record, fenced.
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
  if (known?.ok && (known.recorded || (!record && now < known.until))) return;
  if (known && !known.ok && now < known.until) throw known.error;
  // The placements record lives on shard 0: it must have the table before it can fence.
  await ready(worker, config, 0, now);
  const recorded = record ? await recordPlacement(worker, config, workspace, shard, now) : await readPlacement(worker, config, workspace);
  if (fences.entries.size >= MAX_REMEMBERED) fences.entries.clear();
  // Unrecorded and not recording (the hook route): nothing says the data is elsewhere, and a hook
  // finds its workflow only where the map points — it can start nothing on a shard holding none.
  if (recorded === shard) {
    fences.entries.set(workspace, { ok: true, recorded: true });
    return;
  }
  if (recorded === null) {
    fences.entries.set(workspace, { ok: true, recorded: false, until: now + UNRECORDED_RECHECK_MS });
    return;
  }
  const error = shardProblems.workspaceMisplaced(workspace, shard, recorded);
  fences.entries.set(workspace, { ok: false, until: now + RECHECK_MS, error });
  throw error;
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
