/**
 * The key memory's settings and bindings (docs/history.md "Key memory: hot and cold"):
 * - `KEY_MEMORY` — the R2 bucket of the cold tier (wrangler.toml; its own bucket, not the archive's);
 * - `KEY_MEMORY_HOT` — how long a kept key send stays in D1 after its destination may have
 *   forgotten the key — past its declared retention, counted from `counted_from` (migrations/0036:
 *   per key, since retentions run from 24 h to 365 d) — before it may move cold; for a send
 *   recorded without a retention, the whole hot period from `counted_from`. A duration, default
 *   `1d` (a Stripe key, 24 h, moves after two days; an Adyen key, 31 d, after 32). At least `10s`
 *   (a test or soak knob: keys go cold within a run); an invalid value falls back to the default. A
 *   step that still holds the key keeps it hot however old (src/ledger/key-memory.ts `selectColdDue`).
 * Without a bucket nothing moves: kept sends stay in D1, as before the cold tier.
 */
import { durationMs, DURATION_PATTERN } from "../definitions/schema";
import { keySendHorizonMs } from "../history/retention";

export const DEFAULT_KEY_MEMORY_HOT_MS = 86_400_000;
const MIN_KEY_MEMORY_HOT_MS = 10_000;

export interface KeyMemoryVars {
  KEY_MEMORY?: R2Bucket;
  KEY_MEMORY_HOT?: string;
}

/** The cold tier's bucket, or null when none is bound. */
export function keyMemoryBucket(env: object): R2Bucket | null {
  return (env as KeyMemoryVars).KEY_MEMORY ?? null;
}

/** `KEY_MEMORY_HOT` in ms. */
export function keyMemoryHotMs(env: object): number {
  const value = (env as KeyMemoryVars).KEY_MEMORY_HOT;
  if (typeof value !== "string" || !DURATION_PATTERN.test(value)) return DEFAULT_KEY_MEMORY_HOT_MS;
  const ms = durationMs(value);
  return ms >= MIN_KEY_MEMORY_HOT_MS ? ms : DEFAULT_KEY_MEMORY_HOT_MS;
}

/** HISTORY_KEY_SENDS (src/history/retention.ts): kept sends counted from longer ago are forgotten on purpose; null: kept for good. */
export function keyForgetHorizonMs(env: object): number | null {
  return keySendHorizonMs(env as { HISTORY_KEY_SENDS?: string });
}
