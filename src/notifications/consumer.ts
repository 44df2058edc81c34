/**
 * The queue's notification messages (src/queue.ts routes them here by `type`), on the shard their
 * `shard` names: each is one delivery attempt (./deliver.ts), acked once the attempt is on record
 * (a retry is a new delayed message, not a queue retry: the queue's own retry count never gives a
 * notification up). A malformed body is acked and logged; a database error retries the message.
 */
import { errorMessage, log } from "../lib/log";
import { nowOf } from "../lib/clock";
import { outboundFetchOf } from "../lib/outbound-fetch";
import { deliverNotification, type NotifyDeps } from "./deliver";
import { parseNotificationMessage } from "./messages";

export function notifyDepsOf(env: Env): NotifyDeps {
  return {
    db: env.DB,
    env: env as unknown as Record<string, unknown>,
    fetch: outboundFetchOf(env),
    now: () => nowOf(env),
    queue: env.QUEUE,
  };
}

export async function handleNotificationMessages(messages: ReadonlyArray<Message<unknown>>, deps: NotifyDeps): Promise<void> {
  for (const m of messages) {
    const parsed = parseNotificationMessage(m.body);
    if (parsed === null) {
      log.error("queue.message_malformed", {
        messageId: m.id,
        why: "a notification message names no outbox row (id, or executionId and event)",
      });
      m.ack();
      continue;
    }
    try {
      await deliverNotification(deps, parsed);
      m.ack();
    } catch (error) {
      log.error("queue.message_poison", {
        messageId: m.id,
        why: `notification ${JSON.stringify(parsed)}: ${errorMessage(error)}`,
        retried: true,
      });
      m.retry({ delaySeconds: 30 });
    }
  }
}
