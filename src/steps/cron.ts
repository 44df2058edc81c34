/** The periodic task of steps: the reaper, on the tick's clock. */
import type { PeriodicTask } from "../lib/periodic-task";
import { reap, reapLogLine, type ReapReport } from "./reaper";
import { defaultRuntime } from "./runtime";

export const reaperTask: PeriodicTask<ReapReport> = {
  name: "steps reaper",
  run: (env, tick) => reap(defaultRuntime(env, { now: () => tick.scheduledTime })),
  logLine: reapLogLine,
};
