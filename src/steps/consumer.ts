/**
 * The queue consumer. Both queues land here: the step queue runs steps, the dead-letter queue
 * records what reached it (`batch.queue` tells which).
 *
 * With chaining on (src/steps/chain.ts), a message's settle may claim a successor and run it in
 * this invocation before the message is acked; the batch shares one budget.
 *
 * Per message: malformed body → ack and log (poison is never retried forever); an execution not on
 * the message's shard → acked if its tombstone says it was removed, else retried with an alert (a
 * message for a shard that has not got its rows is a deployment fault, never a reason to drop a
 * step: after `max_retries` it is recorded as a dead letter); claimed → run and settle → ack;
 * already settled → ack; lease live elsewhere or not due yet → retry after that delay, but from
 * `DROP_REDELIVERY_AT_ATTEMPT` deliveries on → ack (the reaper covers the step; a healthy long
 * call must not push duplicates into the DLQ); a crash mid-step → retry after one lease, by which time the step can be taken over.
 *
 * Dead letters are recorded with their step's state: a dead letter for a settled or waiting step
 * is marked harmless (`redelivery_dropped`), not `dead_lettered` (src/ledger/step-recovery.ts).
 */
import { executionRemoved, recordDeadLetters } from "../ledger";
import { ChainBudget, queriesPerMessage } from "./chain";
import { parseStepMessage } from "./messages";
import { maybeReap } from "./reaper";
import { delaySeconds } from "./retry-policy";
import { MIN_HEARTBEAT_MS } from "./heartbeat";
import { runStep } from "./run-step";
import { runItem } from "./map-item";
import { runUndo } from "./compensate";
import { defaultRuntime, type StepRuntime } from "./runtime";
import type { QueryReservation } from "../lib/query-count";
import { errorMessage, log } from "../lib/log";
import { shardOfEnv } from "../shards/shard-env";

const MAX_DEAD_LETTER_BODY = 4096;
/** How long a message whose execution is not on its shard waits before it is tried again. */
const MISSING_RETRY_SECONDS = 60;

export function isDeadLetterQueue(queue: string): boolean {
  return queue.endsWith("-dlq");
}

export async function processStepMessage(message: Message<unknown>, rt: StepRuntime): Promise<void> {
  const ref = parseStepMessage(message.body);
  if (!ref) {
    log.error("queue.message_malformed", { messageId: message.id });
    message.ack();
    return;
  }
  try {
    const delivery = { messageId: message.id, attempts: message.attempts, ...(ref.wake ? { permitWake: true } : {}) };
    // A MAP item's message names its item (src/steps/messages.ts): the item's runner (docs/steps.md "MAP").
    // An undo step of a compensation names its place (docs/steps.md "Compensation"): the undo's runner.
    const decision =
      ref.undo !== undefined
        ? await runUndo({ executionId: ref.executionId, vertexId: ref.vertexId, place: ref.undo }, rt, delivery)
        : ref.item === undefined
          ? await runStep(ref, rt, delivery)
          : await runItem({ executionId: ref.executionId, vertexId: ref.vertexId, item: ref.item }, rt, delivery);
    switch (decision.action) {
      case "ack":
        message.ack();
        return;
      case "drop":
        log.warn("queue.message_dropped", { messageId: message.id, deliveries: message.attempts, ...ref, why: decision.why });
        message.ack();
        return;
      case "poison":
        log.error("queue.message_poison", { messageId: message.id, ...ref, why: decision.why });
        message.ack();
        return;
      case "missing":
        if (await executionRemoved(rt.db, ref.executionId)) {
          log.warn("queue.message_dropped", { messageId: message.id, deliveries: message.attempts, ...ref, why: "execution removed" });
          message.ack();
          return;
        }
        log.error("queue.execution_missing", {
          messageId: message.id,
          deliveries: message.attempts,
          shard: shardOfEnv(rt.env),
          ...ref,
          message: "the message's shard has no such execution; retried (a shard binding or placement is wrong if this repeats)",
        });
        message.retry({ delaySeconds: MISSING_RETRY_SECONDS });
        return;
      case "retry":
        message.retry({ delaySeconds: delaySeconds(decision.delayMs) });
        return;
    }
  } catch (error) {
    // The step (if claimed) stays EXECUTING under its lease; after it, a redelivery takes over.
    log.error("step.crashed", { message: "step run crashed; retrying after the lease", ...ref, error: errorMessage(error) });
    message.retry({ delaySeconds: delaySeconds(rt.leaseMs) });
  }
}

async function storeDeadLetters(batch: MessageBatch<unknown>, rt: StepRuntime): Promise<void> {
  const now = rt.now();
  const letters = batch.messages.map((m) => {
    let body = JSON.stringify(m.body) ?? "null";
    if (body.length > MAX_DEAD_LETTER_BODY) body = JSON.stringify(`[omitted: ${body.length} characters]`);
    log.error("queue.dead_lettered", { messageId: m.id, deliveries: m.attempts, body });
    return { queue: batch.queue, messageId: m.id, body, attempts: m.attempts, step: parseStepMessage(m.body) };
  });
  await recordDeadLetters(rt.db, letters, now);
  batch.ackAll();
}

/**
 * Each message's own step (claim, inputs, key persist, heartbeats, settle) runs beside the chained
 * steps and is never offered: hold its queries back from them until the message is done — all
 * before the first message starts (docs/steps.md "Chaining": the arithmetic).
 */
export function holdForMessages(
  budget: ChainBudget | undefined,
  messages: number,
  rt: Pick<StepRuntime, "heartbeatEveryMs" | "leaseMs">,
): Array<QueryReservation | undefined> {
  // The heartbeat of a message's own claim: as src/steps/run-step.ts `withHeartbeat` runs it.
  const every = rt.heartbeatEveryMs ?? Math.max(MIN_HEARTBEAT_MS, Math.floor(rt.leaseMs / 3));
  return Array.from({ length: messages }, () => budget?.reserve(queriesPerMessage(every)));
}

/**
 * Runs one shard's messages of a batch (src/queue.ts splits a batch by shard): `env` is that shard's.
 * `shared` is the invocation's chaining budget when the batch spans shards (the D1 query limit is
 * per invocation); without it the batch gets its own.
 */
export async function handleStepBatch(
  batch: MessageBatch<unknown>,
  env: Env,
  ctx: ExecutionContext,
  rt: StepRuntime = defaultRuntime(env),
  shared?: ChainBudget,
): Promise<void> {
  if (isDeadLetterQueue(batch.queue)) return storeDeadLetters(batch, rt);
  const budget = rt.chain ? (shared ?? new ChainBudget(rt.chain, rt.db, rt.now() + rt.chain.maxMs)) : undefined;
  const run = budget ? { ...rt, db: budget.countOn(rt.db), budget } : rt;
  const holds = holdForMessages(budget, batch.messages.length, rt);
  await Promise.all(
    batch.messages.map(async (m, i) => {
      try {
        await processStepMessage(m, { ...run, messageHold: holds[i] });
      } finally {
        holds[i]?.release();
      }
    }),
  );
  maybeReap(rt, ctx);
}
