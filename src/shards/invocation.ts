/**
 * One invocation's shards: each shard's env, its database counted with one tally. A queue batch or
 * a cron tick may work on every shard, and Workers allow 1,000 D1 queries per invocation, not per
 * database: whatever budgets the work (the chaining budget, the cron allocator) sees the sum.
 */
import { countQueries, type CountedD1 } from "../lib/query-count";
import { databaseOf, shardConfig, type ShardConfig } from "./config";
import { shardEnv, workerEnv, type ShardEnv } from "./shard-env";

export class InvocationShards {
  readonly worker: Env;
  readonly config: ShardConfig;
  #first: CountedD1 | undefined;
  readonly #envs = new Map<number, ShardEnv>();

  constructor(env: Env) {
    this.worker = workerEnv(env);
    this.config = shardConfig(this.worker);
  }

  get count(): number {
    return this.config.bindings.length;
  }

  /** Whether this deployment binds shard `shard`. */
  has(shard: number): boolean {
    return Number.isSafeInteger(shard) && shard >= 0 && shard < this.count;
  }

  /** Shard `shard`'s env for this invocation (its `DB` counted on the invocation's tally). */
  env(shard: number): ShardEnv {
    const known = this.#envs.get(shard);
    if (known) return known;
    const counted = countQueries(databaseOf(this.worker, this.config, shard), { sharing: this.#first });
    this.#first ??= counted;
    const env = shardEnv(this.worker, shard, counted.db);
    this.#envs.set(shard, env);
    return env;
  }

  /** Queries this invocation sent, over every shard. */
  queries(): number {
    return this.#first?.queries() ?? 0;
  }
}
