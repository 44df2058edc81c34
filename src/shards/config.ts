/**
 * Which databases exist and where each workspace lives (SPEC section 13, docs/shards.md).
 *
 * `D1_SHARDS` lists the D1 bindings in shard order (`"DB,DB_1"`: `DB` is shard 0, always). It is
 * append-only: a shard's number is where its workspaces' rows are. `WORKSPACE_SHARDS` places
 * workspaces: `workspace:shard` pairs, and `*:shard` for every workspace it does not list (0 when
 * absent). Placement is an explicit map, never a hash over the shard count: adding a shard must
 * move no one.
 *
 * Both vars are parsed once per isolate per value; a lookup is a map read, no I/O.
 */
import { shardProblems } from "./problems";

export interface ShardConfig {
  /** The binding names, in shard order. */
  readonly bindings: readonly string[];
  /** Workspaces the map names. */
  readonly placed: ReadonlyMap<string, number>;
  /** The shard of every workspace the map does not name. */
  readonly defaultShard: number;
  /** Identifies these var values (the placement fence's cache key). */
  readonly key: string;
}

type ShardVars = Pick<Env, "D1_SHARDS" | "WORKSPACE_SHARDS">;

/**
 * The most shards one deployment binds: one cron tick runs every shard's bounded tasks within its
 * 1,000 queries (./cron.ts: 7 × 120 ≤ 900). More needs the tick to fan out per shard through the
 * queue (docs/shards.md "What comes next"); until then a longer D1_SHARDS is refused, not overrun.
 */
export const MAX_SHARDS = 7;

let cached: { shards: string; placement: string; config: ShardConfig } | undefined;

/**
 * The shard configuration of `env` (a Worker's env as delivered: its bindings by their names);
 * throws `shards-misconfigured` (503) for vars that cannot be right.
 */
export function shardConfig(env: Env): ShardConfig {
  const vars = env as ShardVars;
  const shards = String(vars.D1_SHARDS ?? "DB");
  const placement = String(vars.WORKSPACE_SHARDS ?? "");
  if (cached && cached.shards === shards && cached.placement === placement) return cached.config;
  const bindings = parseShardList(shards);
  for (const name of bindings) {
    if (!bindingOf(env, name))
      throw shardProblems.misconfigured(`D1_SHARDS names "${name}", but the Worker has no D1 binding of that name.`);
  }
  const { placed, defaultShard } = parsePlacement(placement, bindings.length);
  const config: ShardConfig = { bindings, placed, defaultShard, key: `${shards}|${placement}` };
  cached = { shards, placement, config };
  return config;
}

/** The database of shard `shard` in `env` (a Worker's env as delivered). */
export function databaseOf(env: Env, config: ShardConfig, shard: number): D1Database {
  const name = config.bindings[shard];
  const db = name === undefined ? undefined : bindingOf(env, name);
  if (!db) throw shardProblems.unknownShard(shard, config.bindings.length);
  return db;
}

/** The shard of `workspace`: the map's entry, else the default. */
export function shardOf(config: ShardConfig, workspace: string): number {
  return config.placed.get(workspace) ?? config.defaultShard;
}

/** `"DB,DB_1"` → the binding names; `DB` first, no repeats. */
export function parseShardList(spec: string): string[] {
  const names = spec.split(",").map((name) => name.trim());
  if (names.length > MAX_SHARDS) {
    throw shardProblems.misconfigured(
      `D1_SHARDS lists ${names.length} shards; one deployment binds at most ${MAX_SHARDS} (docs/shards.md).`,
    );
  }
  if (names.some((name) => name.length === 0)) throw shardProblems.misconfigured(`D1_SHARDS "${spec}" has an empty name.`);
  if (names[0] !== "DB")
    throw shardProblems.misconfigured(`D1_SHARDS must start with DB (shard 0, where existing data lives); got "${spec}".`);
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) throw shardProblems.misconfigured(`D1_SHARDS names "${name}" twice: each shard is its own database.`);
    seen.add(name);
  }
  return names;
}

/** `"dev:0,other:1,*:0"` → the map and the default shard; every shard must exist. Spaces around a name or number are dropped. */
export function parsePlacement(spec: string, shardCount: number): { placed: Map<string, number>; defaultShard: number } {
  const placed = new Map<string, number>();
  let defaultShard = 0;
  for (const entry of spec.split(",").map((pair) => pair.trim())) {
    if (entry.length === 0) continue;
    const at = entry.lastIndexOf(":");
    // Spaces around either part are layout ("acme-eu : 1"), never part of the name: a name kept
    // with its space would place "acme-eu " and leave the real acme-eu on the default shard.
    const workspace = entry.slice(0, Math.max(at, 0)).trim();
    const shardText = entry.slice(at + 1).trim();
    const shard = /^\d{1,4}$/.test(shardText) ? Number(shardText) : NaN;
    if (at <= 0 || workspace.length === 0 || !Number.isInteger(shard)) {
      throw shardProblems.misconfigured(
        `WORKSPACE_SHARDS entry "${entry}" is not \`workspace:shard\` (e.g. "other:1", or "*:1" for the default).`,
      );
    }
    if (shard >= shardCount) {
      throw shardProblems.misconfigured(
        `WORKSPACE_SHARDS places "${workspace}" on shard ${shard}, but D1_SHARDS lists ${shardCount} shard(s).`,
      );
    }
    if (workspace === "*") defaultShard = shard;
    else if (placed.has(workspace)) throw shardProblems.misconfigured(`WORKSPACE_SHARDS places "${workspace}" twice.`);
    else placed.set(workspace, shard);
  }
  return { placed, defaultShard };
}

function bindingOf(env: Env, name: string): D1Database | undefined {
  const value = Object.hasOwn(env, name) ? (env as unknown as Record<string, unknown>)[name] : undefined;
  return value !== null && typeof value === "object" && typeof (value as D1Database).prepare === "function"
    ? (value as D1Database)
    : undefined;
}
