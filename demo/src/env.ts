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
}
