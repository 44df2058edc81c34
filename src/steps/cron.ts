/** The periodic tasks of steps, on the tick's clock: the reaper, and the wake-up of parked steps. */
import { dueParkedSteps } from "../ledger";
import type { PeriodicTask } from "../lib/periodic-task";
import { dueParkedItems } from "../ledger/connector-permits";
import { sendItemMessages, sendStepMessages } from "./dispatch";
import { reap, reapLogLine, type ReapReport } from "./reaper";
import { defaultRuntime } from "./runtime";

export const reaperTask: PeriodicTask<ReapReport> = {
  name: "steps reaper",
  run: (env, tick) => reap(defaultRuntime(env, { now: () => tick.scheduledTime })),
  logLine: reapLogLine,
};

/**
 * How late a parked step's own wake-up message may be before the cron sends another: a sleep of
 * up to 12 hours carries its wake-up in a delayed message (src/steps/run-step.ts), which normally
 * claims the step first; a longer sleep has none, and this task wakes it within a minute of its time.
 */
export const WAKE_GRACE_MS = 60_000;
/** Parked steps woken per tick per shard (one statement, bounded). */
export const WAKE_LIMIT = 200;

export interface WakeReport {
  woken: number;
}

/**
 * The wake-up of parked steps (a DELAY sleeping) whose time came: one read over the wake index and
 * a message each. The claim the message makes is the resume, fenced, so a step woken by both its
 * own message and this task resumes once.
 */
export const wakeTask: PeriodicTask<WakeReport> = {
  name: "steps wake-up",
  async run(env, tick) {
    const due = await dueParkedSteps(env.DB, tick.scheduledTime, WAKE_GRACE_MS, WAKE_LIMIT);
    await sendStepMessages(env.QUEUE as never, due);
    // MAP items parked for a connector's permit (src/steps/map-item.ts) whose wake-up was lost.
    const items = await dueParkedItems(env.DB, tick.scheduledTime, WAKE_GRACE_MS, WAKE_LIMIT);
    await sendItemMessages(env.QUEUE as never, items);
    return { woken: due.length + items.length };
  },
  logLine: ({ woken }) => (woken === 0 ? null : { level: "info", event: "steps.woken", fields: { woken } }),
};
