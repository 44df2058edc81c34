/**
 * The deployment's event settings (wrangler.toml [vars], SPEC section 14):
 * - EVENT_BUFFER (default 24h): how long an event no wait took stays available to a wait that
 *   starts later;
 * - EVENT_DEDUPE_WINDOW (default 24h): how long an event without an id deduplicates by its content
 *   (an event with an id deduplicates as long as its row is kept);
 * - EVENT_HISTORY (default 7d, never shorter than the other two): how long an event's row is kept
 *   after it arrived — its duplicates are recognised until then.
 * Each is a duration var (src/definitions/duration-vars.ts: 1m to 365d; an invalid one takes its
 * default and is logged once per isolate and value as `config.invalid_var`).
 */
import { durationVar } from "../definitions/duration-vars";

const HOUR_MS = 3_600_000;

export interface EventSettings {
  bufferMs: number;
  dedupeWindowMs: number;
  historyMs: number;
}

export const DEFAULT_EVENT_SETTINGS: EventSettings = Object.freeze({
  bufferMs: 24 * HOUR_MS,
  dedupeWindowMs: 24 * HOUR_MS,
  historyMs: 7 * 24 * HOUR_MS,
});

export interface EventVars {
  EVENT_BUFFER?: string;
  EVENT_DEDUPE_WINDOW?: string;
  EVENT_HISTORY?: string;
}

export function eventSettings(vars: EventVars): EventSettings {
  const bufferMs = durationVar("EVENT_BUFFER", vars.EVENT_BUFFER, DEFAULT_EVENT_SETTINGS.bufferMs);
  const dedupeWindowMs = durationVar("EVENT_DEDUPE_WINDOW", vars.EVENT_DEDUPE_WINDOW, DEFAULT_EVENT_SETTINGS.dedupeWindowMs);
  const historyMs = Math.max(durationVar("EVENT_HISTORY", vars.EVENT_HISTORY, DEFAULT_EVENT_SETTINGS.historyMs), bufferMs, dedupeWindowMs);
  return { bufferMs, dedupeWindowMs, historyMs };
}
