/** Cron entry of steps: the reaper. */
export async function stepsCron(_env: Env, _ctx: ExecutionContext, _now: number): Promise<void> {}
