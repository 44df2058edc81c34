/** Cron entry of ingress: scheduled workflows and the trigger-identity sweep. */
export async function ingressCron(_controller: ScheduledController, _env: Env, _ctx: ExecutionContext): Promise<void> {}
