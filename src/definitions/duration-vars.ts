/**
 * A deployment var that holds a duration (wrangler.toml [vars]: HISTORY_*, EVENT_*): parsed once
 * per isolate per value, held to 1 minute–365 days; a value that is not one falls back to the
 * caller's default and is logged once per isolate, variable and value as `config.invalid_var`
 * (docs/logging.md). An unset or empty var is the default, silently.
 */
import { log } from "../lib/log";
import { DURATION_PATTERN, durationMs, MAX_DURATION_MS, MIN_HISTORY_MS } from "./schema";

const DAY_MS = 86_400_000;
/** Vars have a handful of values: both memories are bounded by this and start over when full. */
const MAX_REMEMBERED = 64;
/** Per isolate: each value met, parsed (ms, or why it is refused). */
const parsedValues = new Map<string, number | string>();
/** Per isolate: the `variable\0value` pairs already logged. */
const reportedValues = new Set<string>();

/** The var's duration in ms, or `fallbackMs` (logged once when the value is set but not a duration from 1m to 365d). */
export function durationVar(variable: string, value: unknown, fallbackMs: number): number {
  if (value === undefined || value === null || value === "") return fallbackMs;
  const text = String(value);
  const parsed = parseVar(text);
  if (typeof parsed === "number") return parsed;
  const shown = text.length > 100 ? `${text.slice(0, 100)}…` : text;
  const fallback = formatDuration(fallbackMs);
  reportOnce(variable, text, {
    variable,
    value: shown,
    fallback,
    message:
      `${variable} ${JSON.stringify(shown)} ${parsed}; using the default ${fallback}. ` +
      "Set it to a duration from 1m to 365d in wrangler.toml [vars]",
  });
  return fallbackMs;
}

/** Logs `config.invalid_var` with `fields` unless this variable's value was already logged in this isolate. */
export function reportOnce(variable: string, value: string, fields: Record<string, unknown>): void {
  const key = `${variable}\u0000${value}`;
  if (reportedValues.has(key)) return;
  if (reportedValues.size >= MAX_REMEMBERED) reportedValues.clear();
  reportedValues.add(key);
  log.warn("config.invalid_var", fields);
}

function parseVar(value: string): number | string {
  const known = parsedValues.get(value);
  if (known !== undefined) return known;
  const parsed = parseDuration(value);
  if (parsedValues.size >= MAX_REMEMBERED) parsedValues.clear();
  parsedValues.set(value, parsed);
  return parsed;
}

function parseDuration(value: string): number | string {
  if (!DURATION_PATTERN.test(value)) return "is not a duration (such as `90s`, `30m`, `24h` or `7d`)";
  const ms = durationMs(value);
  if (ms < MIN_HISTORY_MS) return "is shorter than one minute, the shortest this var may be";
  if (ms > MAX_DURATION_MS) return "is longer than 365 days, the longest this var may be";
  return ms;
}

/** `604800000` → `7d`: the largest unit that divides it. */
function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ["d", DAY_MS],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1_000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
