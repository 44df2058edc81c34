/**
 * Options of the Idempotency-Key middleware, validated once when the factory runs: a bad
 * option is a programming error and fails at startup, not on the first request.
 */
import type { Context } from "hono";

export interface IdempotencyOptions {
  /**
   * Server-derived principal (e.g. the authenticated workspace). NEVER from a client header or
   * body. The Hono middleware passes its Context as a third argument (see `principalFromContext`).
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the caller's own Env type, whatever it is
  principal: (request: Request, env: any, context?: Context) => string | Promise<string>;
  /**
   * The D1 database (default: env.DB), given the request's env and the principal the rows are
   * scoped by — a deployment that places principals on several databases picks the principal's
   * here (idemflow's own routes need not: its auth middleware already bound `env.DB` to the
   * workspace's shard). A one-argument function still works. Tests pass the counting wrapper here.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the caller's own Env type, whatever it is
  database?: (env: any, principal: string) => D1Database;
  /** Default true: a request without a key is answered 400. When false it runs unguarded. */
  required?: boolean;
  /** Extra request headers in the fingerprint (`content-type` is always in). */
  fingerprintHeaders?: string[];
  /** Extra response headers stored and replayed (`content-type` and `location` always are). */
  replayHeaders?: string[];
  /**
   * Default 1 MiB. The request body is read (to fingerprint it) before anything else runs, so
   * the middleware bounds it itself: a larger body is a 413 before any hashing or D1 write, and
   * never sits whole in memory. Set it to the largest body the route accepts.
   */
  maxBodyBytes?: number;
  /** Default 16 KiB. A larger response body is stored as a 500 sentinel. */
  maxStoredBodyBytes?: number;
  /** Default 60 s. After this a pending reservation may be taken over by a retry. */
  pendingTtlMs?: number;
  /**
   * Default 1. The most `Retry-After` seconds a 409 "in progress" answer advertises. The lease
   * (`pendingTtlMs`) is how long a dead owner blocks the key, not how long a live one takes: most
   * first requests finish in milliseconds, and a client that honours `Retry-After` (idemflow's
   * own Gateway does) would otherwise wait the whole lease for an answer already stored. The
   * answer is min(remaining lease, this), at least 1 (RFC 9110 delta-seconds are whole seconds).
   */
  maxRetryAfterSeconds?: number;
  /** Default 24 h. How long a key answers after its response was stored; the sweep uses it too. */
  retentionMs?: number;
  /** Default 422. */
  mismatchStatus?: 422 | 409;
  /** Return false to not store a response (the reservation is released so a retry runs again). */
  shouldStore?: (response: Response) => boolean | Promise<boolean>;
  /** The clock (tests). Default Date.now. */
  now?: () => number;
  /**
   * The opportunistic sweep after responses (`ctx.waitUntil`): at most one bounded batch per
   * `intervalMs` per middleware instance per isolate. `false` leaves the sweep to cron.
   */
  sweep?: false | { batchSize?: number; intervalMs?: number };
}

export const DEFAULTS = {
  maxStoredBodyBytes: 16 * 1024,
  maxBodyBytes: 1024 * 1024,
  pendingTtlMs: 60_000,
  maxRetryAfterSeconds: 1,
  retentionMs: 24 * 60 * 60 * 1000,
  sweepBatchSize: 100,
  sweepIntervalMs: 60_000,
} as const;

/** Methods the ledger guards; others pass straight through (they are safe or idempotent). */
export const GUARDED_METHODS = new Set(["POST", "PATCH", "DELETE"]);

export interface ResolvedOptions {
  principal: IdempotencyOptions["principal"];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the caller's own Env type, whatever it is
  database: (env: any, principal: string) => D1Database;
  required: boolean;
  fingerprintHeaders: readonly string[];
  replayHeaders: readonly string[];
  maxStoredBodyBytes: number;
  maxBodyBytes: number;
  pendingTtlMs: number;
  maxRetryAfterSeconds: number;
  retentionMs: number;
  mismatchStatus: 422 | 409;
  shouldStore: (response: Response) => boolean | Promise<boolean>;
  /** Absent: the request env's clock (src/lib/clock.ts: `Date.now()` in production). */
  now?: () => number;
  sweep: false | { batchSize: number; intervalMs: number };
}

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function resolveOptions(options: IdempotencyOptions): ResolvedOptions {
  const fail = (message: string): never => {
    throw new TypeError(`idempotency(): ${message}`);
  };
  if (!options || typeof options !== "object") fail("options are required");
  if (typeof options.principal !== "function") {
    fail("`principal` must be a function deriving the principal on the server (e.g. the authenticated workspace)");
  }
  if (options.database !== undefined && typeof options.database !== "function")
    fail("`database` must be a function (env, principal) => D1Database");
  const positiveInt = (name: string, value: number | undefined, fallback: number): number => {
    if (value === undefined) return fallback;
    if (!Number.isSafeInteger(value) || value < 1) fail(`\`${name}\` must be a positive integer, got ${String(value)}`);
    return value;
  };
  const headerList = (name: string, value: string[] | undefined, always: string[]): string[] => {
    if (value !== undefined && !Array.isArray(value)) fail(`\`${name}\` must be an array of header names`);
    for (const h of value ?? [])
      if (typeof h !== "string" || !HEADER_NAME.test(h)) fail(`\`${name}\` contains an invalid header name: ${String(h)}`);
    return [...new Set([...always, ...(value ?? []).map((h) => h.toLowerCase())])].sort();
  };

  const pendingTtlMs = positiveInt("pendingTtlMs", options.pendingTtlMs, DEFAULTS.pendingTtlMs);
  const retentionMs = positiveInt("retentionMs", options.retentionMs, DEFAULTS.retentionMs);
  // A reservation must outlive its lease, or a running handler's row could be swept and its
  // key re-used while it still runs.
  if (retentionMs <= pendingTtlMs) fail(`\`retentionMs\` (${retentionMs}) must be greater than \`pendingTtlMs\` (${pendingTtlMs})`);
  if (options.mismatchStatus !== undefined && options.mismatchStatus !== 422 && options.mismatchStatus !== 409) {
    fail(`\`mismatchStatus\` must be 422 or 409, got ${String(options.mismatchStatus)}`);
  }
  if (options.required !== undefined && typeof options.required !== "boolean") fail("`required` must be a boolean");
  if (options.shouldStore !== undefined && typeof options.shouldStore !== "function") fail("`shouldStore` must be a function");
  if (options.now !== undefined && typeof options.now !== "function") fail("`now` must be a function returning epoch milliseconds");

  let sweep: ResolvedOptions["sweep"] = false;
  if (options.sweep !== false) {
    if (options.sweep !== undefined && typeof options.sweep !== "object") fail("`sweep` must be false or { batchSize?, intervalMs? }");
    sweep = {
      batchSize: positiveInt("sweep.batchSize", options.sweep?.batchSize, DEFAULTS.sweepBatchSize),
      intervalMs: positiveInt("sweep.intervalMs", options.sweep?.intervalMs, DEFAULTS.sweepIntervalMs),
    };
  }

  return {
    principal: options.principal,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the caller's own Env type, whatever it is
    database: options.database ?? ((env: any) => env?.DB as D1Database),
    required: options.required ?? true,
    fingerprintHeaders: headerList("fingerprintHeaders", options.fingerprintHeaders, ["content-type"]),
    replayHeaders: headerList("replayHeaders", options.replayHeaders, ["content-type", "location"]),
    maxStoredBodyBytes: positiveInt("maxStoredBodyBytes", options.maxStoredBodyBytes, DEFAULTS.maxStoredBodyBytes),
    maxBodyBytes: positiveInt("maxBodyBytes", options.maxBodyBytes, DEFAULTS.maxBodyBytes),
    pendingTtlMs,
    maxRetryAfterSeconds: positiveInt("maxRetryAfterSeconds", options.maxRetryAfterSeconds, DEFAULTS.maxRetryAfterSeconds),
    retentionMs,
    mismatchStatus: options.mismatchStatus ?? 422,
    shouldStore: options.shouldStore ?? (() => true),
    now: options.now,
    sweep,
  };
}
