/**
 * The one clock seam: the engine's "now" for everything it records or decides by time — the
 * routes, the periodic tasks and the queue handler read `nowOf(env)` instead of `Date.now()`.
 *
 * Production never sets it: `nowOf` is `Date.now()` then. A test hands the Worker's entry points
 * (`app.fetch`, `handleQueueBatch`, `runScheduled`) `withClock(env, clock)` and drives them in
 * virtual time — windows, retention, tombstone expiry, timeouts — without sleeping
 * (docs/testing.md).
 *
 * The clock travels on the env under a symbol: no wrangler binding or var can set it, and the
 * object spreads that build a shard's env (src/shards/shard-env.ts) copy symbol-keyed properties,
 * so every env derived from the one handed in keeps it.
 *
 * Not through the seam, on purpose: what measures elapsed wall time (a sweep's time budget, the
 * `Prefer: wait` and stream deadlines with their real sleeps, the isolate's placement and schema
 * caches) — virtual time must not make a real wait end early or never.
 */
const CLOCK = Symbol("idemflow.clock");

/** A source of the current time in epoch milliseconds. */
export type Now = () => number;

type WithClock = { readonly [CLOCK]?: Now };

/** Read at each call (a test that replaces `Date.now` still reaches it). */
const wallClock: Now = () => Date.now();

/** `env` with `now` as its clock (a new object; `env` is unchanged). */
export function withClock<E extends object>(env: E, now: Now): E {
  return { ...env, [CLOCK]: now };
}

/** The clock `env` carries, or the wall clock. */
export function clockOf(env: object): Now {
  return (env as WithClock)[CLOCK] ?? wallClock;
}

/** The current time by `env`'s clock (`Date.now()` in production). */
export function nowOf(env: object): number {
  return clockOf(env)();
}

/** A cron tick's time: the injected clock's now when `env` carries one, else the controller's scheduled time. */
export function tickTimeOf(env: object, scheduledTime: number): number {
  const now = (env as WithClock)[CLOCK];
  return now ? now() : scheduledTime;
}
