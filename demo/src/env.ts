/** Bindings of the demo destinations Worker (demo/wrangler.toml). */
export interface DemoEnv {
  DB: D1Database;
  /** Where the payments API sends its charge confirmations (demo/wrangler.toml [vars]; default http://localhost:8787). */
  ENGINE_URL?: string;
  /** The Standard Webhooks secret (`whsec_…`) it signs them with: the engine's event source verifies with the same value. */
  PAYMENTS_WEBHOOK_SECRET?: string;
}

export type DemoAppEnv = { Bindings: DemoEnv };

export interface DemoOptions {
  /** The D1 database (default: env.DB). Tests pass the counting wrapper here. */
  database?: (env: DemoEnv) => D1Database;
  /** The clock (default: Date.now). */
  now?: () => number;
  /** How long `/forgetful/charges` remembers an Idempotency-Key (default 120 s). */
  forgetfulRetentionMs?: number;
  /** How charge confirmations go out (demo/src/confirmations.ts); tests send them in-process, at a moment they choose. */
  confirmations?: Partial<ConfirmationOptions>;
}

export interface ConfirmationOptions {
  /** Sends one delivery (default: `fetch`). */
  fetch: (request: Request) => Promise<Response>;
  /** Waits before the first delivery (default: CONFIRM_DELAY_MS): the charge is answered first, confirmed a moment later. */
  pause: () => Promise<void>;
  /** Overrides ENGINE_URL. */
  engineUrl?: string;
  /** Overrides PAYMENTS_WEBHOOK_SECRET. */
  secret?: string;
}

/** The default of `forgetfulRetentionMs`: two minutes, long enough to watch a retry succeed, short enough to outwait. */
export const FORGETFUL_RETENTION_MS = 120_000;
