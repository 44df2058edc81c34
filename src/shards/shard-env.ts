/**
 * A shard's env: the Worker's env with `DB` bound to one shard's database and `QUEUE` stamping
 * that shard on every message it sends. Everything below an entry point (routes, ingress, the step
 * runtime, the ledger) reads `env.DB` and `env.QUEUE` as before and so works on one shard without
 * knowing there are others; only src/shards names the other bindings.
 *
 * An entry point makes one once: the HTTP middleware from the workspace (./placement.ts), the
 * queue consumer from the message's `shard`, cron per shard (./cron-budget.ts).
 */
import { databaseOf, shardConfig } from "./config";

const WORKER_ENV = Symbol("the Worker's env, as delivered");

export type ShardEnv = Env & { readonly shard: number; readonly [WORKER_ENV]: Env };

/** The Worker's env as delivered (every binding under its own name), from it or from a shard's env. */
export function workerEnv(env: Env): Env {
  return (env as Partial<ShardEnv>)[WORKER_ENV] ?? env;
}

/** The shard `env` is bound to: a shard's env knows; the Worker's env is shard 0's (`DB`). */
export function shardOfEnv(env: Env): number {
  return (env as Partial<ShardEnv>).shard ?? 0;
}

/** Shard `shard`'s env; `db` replaces its database (the invocation's counted wrapper of it). */
export function shardEnv(env: Env, shard: number, db?: D1Database): ShardEnv {
  const worker = workerEnv(env);
  const database = db ?? databaseOf(worker, shardConfig(worker), shard);
  return { ...worker, DB: database, QUEUE: stampedQueue(worker.QUEUE, shard), shard, [WORKER_ENV]: worker };
}

/** A message body with its shard: every step message and continuation says where its rows are. */
function stamp(body: unknown, shard: number): unknown {
  return body !== null && typeof body === "object" && !Array.isArray(body) ? { ...body, shard } : body;
}

function stampedQueue(queue: Queue, shard: number): Queue {
  return {
    send: (body: unknown, options?: QueueSendOptions) => queue.send(stamp(body, shard), options),
    sendBatch: (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) =>
      queue.sendBatch(
        Array.from(messages, (m) => ({ ...m, body: stamp(m.body, shard) })),
        options,
      ),
  } as Queue;
}
