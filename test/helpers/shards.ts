/**
 * The suite's view of shards (SPEC section 13): which bindings are shards, the database of the
 * shard a workspace is placed on, and the env of that shard as the engine's entry points build it.
 */
import { shardConfig, shardOf } from "../../src/shards/config";
import { shardEnv } from "../../src/shards/shard-env";

type ShardBinding = "DB" | "DB_1";

/** The D1 bindings D1_SHARDS lists, in shard order. */
export function shardBindings(env: Env): ShardBinding[] {
  return String(env.D1_SHARDS ?? "DB")
    .split(",")
    .map((name) => name.trim() as ShardBinding);
}

/** The shard `workspace` is placed on by the env's WORKSPACE_SHARDS. */
export function shardIndexOf(env: Env, workspace: string): number {
  return shardOf(shardConfig(env), workspace);
}

/** The database of `workspace`'s shard, as the engine's entry points would choose it. */
export function dbOf(env: Env, workspace: string): D1Database {
  return shardEnv(env, shardIndexOf(env, workspace)).DB;
}

/**
 * `env` with the database of `workspace`'s shard replaced by `db` (a counting wrapper): the engine,
 * choosing that shard, sends every statement of the workspace through it.
 */
export function withShardDatabase(env: Env, workspace: string, db: D1Database): Env {
  const binding = shardBindings(env)[shardIndexOf(env, workspace)]!;
  return { ...env, [binding]: db };
}

/** The binding of `workspace`'s shard in `env`. */
export function shardBindingOf(env: Env, workspace: string): ShardBinding {
  return shardBindings(env)[shardIndexOf(env, workspace)]!;
}

/**
 * The Worker's env as the runtime delivers it: in project `shard-1` the test code's `env.DB` is an
 * alias of shard 1's database (test/apply-migrations.ts); this undoes it, so `DB` is shard 0 again.
 */
export function deliveredEnv(env: Env): Env {
  const shard0 = (env as Cloudflare.Env).TEST_SHARD_0;
  return shard0 ? { ...env, DB: shard0 } : env;
}
