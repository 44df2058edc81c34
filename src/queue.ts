/**
 * The queue handler: splits a batch by the shard its messages name (src/shards/messages.ts; none =
 * shard 0) and routes each shard's messages to its subsystem, on that shard's env. Step messages
 * (and the dead-letter queue) go to the step consumer (src/steps/consumer.ts); a history sweep's
 * continuation (src/history/cron.ts) runs the next sweep of its shard and is acked; a body with a
 * `type` is routed by it — `notification` to src/notifications/consumer.ts, any other type is
 * poison, acked and logged (a step message has no `type`). A dead-letter
 * batch goes to the consumer whole per shard: whatever reached the DLQ is recorded on its shard.
 *
 * The whole batch is one invocation: one query tally over every shard's database, and one
 * chaining budget (src/shards/invocation.ts).
 */
import { handleNotificationMessages, notifyDepsOf } from "./notifications/consumer";
import { messageType, NOTIFICATION_MESSAGE_TYPE } from "./notifications/messages";
import { historyLogLine, isHistorySweepMessage, runHistorySweep } from "./history/cron";
import { ChainBudget, chainConfigFromEnv } from "./steps/chain";
import { handleStepBatch, isDeadLetterQueue } from "./steps/consumer";
import { errorMessage, log } from "./lib/log";
import { nowOf } from "./lib/clock";
import { InvocationShards } from "./shards/invocation";
import { byShard } from "./shards/messages";
import { ready } from "./shards/placement";
import type { ShardEnv } from "./shards/shard-env";

/** How long messages wait before another try when their shard cannot be used (not bound yet, schema behind). */
const SHARD_UNAVAILABLE_RETRY_SECONDS = 60;

export async function handleQueueBatch(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
  const shards = new InvocationShards(env);
  const deadLetters = isDeadLetterQueue(batch.queue);
  const chain = deadLetters ? null : chainConfigFromEnv(shards.worker);
  let budget: ChainBudget | undefined;
  const budgetFor = (shardEnv: ShardEnv) =>
    chain ? (budget ??= new ChainBudget(chain, shardEnv.DB, nowOf(env) + chain.maxMs)) : undefined;
  await Promise.all(
    Array.from(byShard(batch.messages), async ([shard, messages]) => {
      // A dead letter is recorded whatever shard it names; one that names none it can use is recorded on shard 0.
      if (shard === null || !shards.has(shard)) {
        if (deadLetters) return handleStepBatch(subBatch(batch, messages), shards.env(0), ctx);
        return unavailable(messages, shard, "the message names a shard this deployment does not bind");
      }
      try {
        await ready(shards.worker, shards.config, shard);
      } catch (error) {
        return unavailable(messages, shard, errorMessage(error));
      }
      const shardEnv = shards.env(shard);
      if (deadLetters) return handleStepBatch(subBatch(batch, messages), shardEnv, ctx);
      const sweeps = messages.filter((m) => isHistorySweepMessage(m.body));
      // A body with a `type` is not a step message: `notification` is delivered, any other is poison.
      const typed = messages.filter((m) => !isHistorySweepMessage(m.body) && messageType(m.body) !== undefined);
      const notifications = typed.filter((m) => messageType(m.body) === NOTIFICATION_MESSAGE_TYPE);
      const steps = messages.filter((m) => !isHistorySweepMessage(m.body) && messageType(m.body) === undefined);
      for (const m of typed) {
        if (messageType(m.body) === NOTIFICATION_MESSAGE_TYPE) continue;
        log.error("queue.message_poison", { messageId: m.id, why: `unknown message type ${JSON.stringify(messageType(m.body))}` });
        m.ack();
      }
      await Promise.all([
        steps.length > 0 ? handleStepBatch(subBatch(batch, steps), shardEnv, ctx, undefined, budgetFor(shardEnv)) : undefined,
        sweeps.length > 0 ? continueSweep(sweeps, shardEnv) : undefined,
        notifications.length > 0 ? handleNotificationMessages(notifications, notifyDepsOf(shardEnv)) : undefined,
      ]);
    }),
  );
}

/**
 * Messages for a shard this version cannot use: retried with an alert, never acked (acking would
 * drop a step; a step whose messages all fail is still re-sent by its shard's reaper once the
 * shard is usable). A `shard` that is not a number is malformed and can never run: acked.
 */
function unavailable(messages: ReadonlyArray<Message<unknown>>, shard: number | null, why: string): void {
  for (const m of messages) {
    if (shard === null) {
      log.error("queue.message_malformed", { messageId: m.id, why: "`shard` is not a shard number" });
      m.ack();
      continue;
    }
    log.error("queue.shard_unavailable", { messageId: m.id, shard, deliveries: m.attempts, why });
    m.retry({ delaySeconds: SHARD_UNAVAILABLE_RETRY_SECONDS });
  }
}

/** One sweep however many continuations arrived together (they all ask for the same work). */
async function continueSweep(messages: ReadonlyArray<Message<unknown>>, env: ShardEnv): Promise<void> {
  try {
    log.line(historyLogLine(await runHistorySweep(env, { now: nowOf(env), via: "queue" })));
  } catch (error) {
    // The next cron tick sweeps again; a retried continuation would only race it.
    log.error("cron.task_failed", { task: "history sweep", shard: env.shard, error: errorMessage(error) });
  }
  for (const m of messages) m.ack();
}

function subBatch(batch: MessageBatch<unknown>, messages: ReadonlyArray<Message<unknown>>): MessageBatch<unknown> {
  return {
    queue: batch.queue,
    metadata: batch.metadata,
    messages,
    ackAll: () => messages.forEach((m) => m.ack()),
    retryAll: (options?: QueueRetryOptions) => messages.forEach((m) => m.retry(options)),
  };
}
