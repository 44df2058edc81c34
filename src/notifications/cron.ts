/**
 * The notifications' periodic task (src/scheduled.ts), bounded within the tick's shared budget
 * (src/shards/cron.ts `BOUNDED_TASK_QUERIES`): at most three statements per shard —
 * 1. re-send pending rows whose message was lost or never sent (`RESEND_LIMIT` a tick);
 * 2. `execution.stuck`: record steps waiting past their workspace's threshold (`STUCK_LIMIT`), once per wait;
 * 3. remove delivered and given-up rows past their keep time (`REMOVE_LIMIT`).
 * The queue sends are one batch per list.
 */
import type { PeriodicTask } from "../lib/periodic-task";
import { overdueNotifications, recordStuckSteps, removeSettledNotifications } from "./outbox";
import { sendNotificationMessages } from "./messages";

export interface NotificationsReport {
  shard: number | undefined;
  resent: number;
  stuck: number;
  removed: number;
}

/** The statements the task sends per shard per tick (src/shards/cron.ts counts it among the bounded tasks). */
export const NOTIFICATIONS_TASK_QUERIES = 3;

export const notificationsTask: PeriodicTask<NotificationsReport> = {
  name: "notifications",
  async run(env, tick) {
    const now = tick.scheduledTime;
    const resent = await overdueNotifications(env.DB, now);
    const stuck = await recordStuckSteps(env.DB, now);
    await sendNotificationMessages(env.QUEUE, [...resent, ...stuck]);
    const removed = await removeSettledNotifications(env.DB, now);
    return { shard: tick.shard, resent: resent.length, stuck: stuck.length, removed };
  },
  logLine: (r) =>
    r.resent + r.stuck + r.removed === 0
      ? null
      : { level: "info", event: "notifications.swept", fields: { shard: r.shard, resent: r.resent, stuck: r.stuck, removed: r.removed } },
};
