/**
 * The queue handler: routes each message of a batch to its subsystem. Step messages (and the
 * dead-letter queue) go to the step consumer (src/steps/consumer.ts); a history sweep's
 * continuation (src/history/cron.ts) runs the next sweep and is acked. A dead-letter batch goes
 * to the consumer whole: whatever reached the DLQ is recorded there.
 */
import { historyLogLine, isHistorySweepMessage, runHistorySweep } from "./history/cron";
import { handleStepBatch, isDeadLetterQueue } from "./steps/consumer";
import { errorMessage, log } from "./lib/log";

export async function handleQueueBatch(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
  if (isDeadLetterQueue(batch.queue)) return handleStepBatch(batch, env, ctx);
  const sweeps = batch.messages.filter((m) => isHistorySweepMessage(m.body));
  if (sweeps.length === 0) return handleStepBatch(batch, env, ctx);
  const steps = batch.messages.filter((m) => !isHistorySweepMessage(m.body));
  await Promise.all([steps.length > 0 ? handleStepBatch(subBatch(batch, steps), env, ctx) : undefined, continueSweep(sweeps, env)]);
}

/** One sweep however many continuations arrived together (they all ask for the same work). */
async function continueSweep(messages: ReadonlyArray<Message<unknown>>, env: Env): Promise<void> {
  try {
    log.line(historyLogLine(await runHistorySweep(env, { now: Date.now(), via: "queue" })));
  } catch (error) {
    // The next cron tick sweeps again; a retried continuation would only race it.
    log.error("cron.task_failed", { task: "history sweep", error: errorMessage(error) });
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
