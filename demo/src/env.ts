/** Bindings of the demo destinations Worker (demo/wrangler.toml). */
export interface DemoEnv {
  DB: D1Database;
}

export type DemoAppEnv = { Bindings: DemoEnv };

export interface DemoOptions {
  /** The D1 database (default: env.DB). Tests pass the counting wrapper here. */
  database?: (env: DemoEnv) => D1Database;
  /** The clock (default: Date.now). */
  now?: () => number;
  /** How long `/forgetful/charges` remembers an Idempotency-Key (default 120 s). */
  forgetfulRetentionMs?: number;
}

/** The default of `forgetfulRetentionMs`: two minutes, long enough to watch a retry succeed, short enough to outwait. */
export const FORGETFUL_RETENTION_MS = 120_000;
