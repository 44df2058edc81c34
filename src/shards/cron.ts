/**
 * Cron over shards: one allocator for the tick's budget (SPEC section 13).
 *
 * A cron invocation has 1,000 D1 queries and 6 simultaneous connections for every shard together.
 * The shards run one after another, each with its tasks at once as before (eight tasks: past six
 * open connections the runtime queues the rest until one frees — they wait, never fail), and each
 * shard gets an equal share of `CRON_QUERY_BUDGET`. Every task but the
 * history sweep is bounded and small (the reaper, the schedules and the identity sweep — its walk
 * 3 to 9 statements, fewer per shard the more shards: src/ledger/identity-sweep.ts `identityWalk` —,
 * the Idempotency-Key sweep, the storage figures, the placement audit, the stats rollup — at most 6
 * statements, src/stats/rollup-task.ts: `BOUNDED_TASK_QUERIES` together);
 * the history sweep gets the rest of its shard's share, so one busy shard's sweep never starves
 * another shard's reaper. A share too small to sweep in (many shards) hands the sweep to its own
 * queue invocation (the continuation message, with a whole invocation's budget).
 */
import { runPeriodicTasks, type AnyPeriodicTask, type Tick } from "../lib/periodic-task";
import { errorMessage, log } from "../lib/log";
import { InvocationShards } from "./invocation";
import { ready, scheduleRefusal as scheduleRefusalOf } from "./placement";

/** The queries a tick spends over every shard (Workers allow 1,000; the rest is headroom). */
export const CRON_QUERY_BUDGET = 900;
/** What one shard's bounded tasks may send in a tick, besides the history sweep. */
export const BOUNDED_TASK_QUERIES = 120;
/** Below this a sweep is not worth starting in the tick: the shard's sweep runs from a queue message instead. */
export const MIN_SWEEP_QUERIES = 60;

/** The history sweep's queries per shard when a tick covers `shards` shards (0: sweep from the queue). */
export function sweepShare(shards: number): number {
  const share = Math.floor(CRON_QUERY_BUDGET / Math.max(1, shards)) - BOUNDED_TASK_QUERIES;
  return share >= MIN_SWEEP_QUERIES ? share : 0;
}

/** Runs `tasks` on every shard, one shard after another; a shard that cannot be used is logged and skipped. */
export async function runOnEveryShard(tasks: ReadonlyArray<AnyPeriodicTask>, env: Env, tick: Tick, ctx: ExecutionContext): Promise<void> {
  const shards = new InvocationShards(env);
  const sweepQueries = sweepShare(shards.count);
  for (let shard = 0; shard < shards.count; shard++) {
    try {
      await ready(shards.worker, shards.config, shard);
    } catch (error) {
      log.error("cron.shard_skipped", { shard, error: errorMessage(error) });
      continue;
    }
    // The schedules of a workspace fire only on its shard, and only once the placement fence passes.
    const scheduleRefusal = (workspace: string) => scheduleRefusalOf(shards.worker, workspace, shard);
    await runPeriodicTasks(
      tasks,
      shards.env(shard),
      { cron: tick.cron, scheduledTime: tick.scheduledTime, shard, shards: shards.count, sweepQueries, scheduleRefusal },
      ctx,
    );
  }
}
