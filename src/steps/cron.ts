/** Cron entry of steps: the reaper, on the cron's clock. */
import { reap } from "./reaper";
import { defaultRuntime } from "./runtime";

export async function stepsCron(env: Env, _ctx: ExecutionContext, now: number): Promise<void> {
  await reap(defaultRuntime(env, { now: () => now }));
}
