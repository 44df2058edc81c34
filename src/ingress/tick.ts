/**
 * The scheduled minute of a tick (SPEC section 3: the same tick delivered twice is one execution,
 * also when a redelivery or a hand delivery carries a later timestamp).
 *
 * A delivery's `scheduledTime` is mapped to the most recent minute at or before it that MATCHES
 * the cron string, looking back at most `TICK_LOOKBACK_MINUTES`: a redelivery of `0 9 * * *` at
 * 09:00:37, or a hand delivery at 09:05, is the 09:00 tick. A time that matches no minute in that
 * window (a hand delivery of a daily schedule in the afternoon) is its own tick: the minute it
 * falls in. Real Cron Triggers carry the exact matching minute, so for them this is the identity.
 *
 * The matcher reads the UTC fields `*`, numbers, `a-b`, `*\/n`, `a-b/n`, lists, and month / weekday
 * names. Where Cron Trigger syntax is ambiguous across cron dialects — a numeric day of week
 * (is 1 Sunday or Monday?), `L`, `W`, `#`, `?`, or both day fields restricted — it does not guess:
 * the tick is the minute the time falls in.
 */

/** How far back a delivery's time may be from its scheduled minute and still be that tick. */
export const TICK_LOOKBACK_MINUTES = 60;

const MINUTE_MS = 60_000;

const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

interface FieldSpec {
  min: number;
  max: number;
  /** Names for the field's values, from `min` on. */
  names?: string[];
  /** Numbers are ambiguous in this field: only names (and `*`) are read. */
  namesOnly?: boolean;
}

const FIELDS: FieldSpec[] = [
  { min: 0, max: 59 },
  { min: 0, max: 23 },
  { min: 1, max: 31 },
  { min: 1, max: 12, names: MONTHS },
  { min: 0, max: 6, names: WEEKDAYS, namesOnly: true },
];

type Matcher = (utc: number[]) => boolean;

function parseValue(text: string, spec: FieldSpec): number | null {
  const upper = text.toUpperCase();
  const named = spec.names?.indexOf(upper) ?? -1;
  if (named >= 0) return spec.min + named;
  if (spec.namesOnly || !/^\d+$/.test(text)) return null;
  const n = Number(text);
  return n >= spec.min && n <= spec.max ? n : null;
}

/** The set of values a field allows, or `null` when this matcher does not read it. */
function parseField(text: string, spec: FieldSpec): Set<number> | null {
  const values = new Set<number>();
  for (const part of text.split(",")) {
    const [range, stepText] = part.split("/");
    const step = stepText === undefined ? 1 : /^\d+$/.test(stepText) ? Number(stepText) : 0;
    if (step < 1 || range === undefined) return null;
    let from: number | null;
    let to: number | null;
    if (range === "*") {
      from = spec.min;
      to = spec.max;
    } else {
      const [a, b] = range.split("-");
      from = parseValue(a ?? "", spec);
      to = b === undefined ? (stepText === undefined ? from : spec.max) : parseValue(b, spec);
    }
    if (from === null || to === null || from > to) return null;
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return values;
}

/** A matcher of UTC [minute, hour, day, month, weekday], or `null` when the cron is not read here. */
export function cronMatcher(cron: string): Matcher | null {
  const parts = cron.trim().split(/\s+/);
  if (parts.length !== 5) return null;
  const [, , day, , weekday] = parts;
  // Both day fields restricted: cron dialects disagree (either one, or both); do not guess.
  if (day !== "*" && weekday !== "*") return null;
  const sets: Array<Set<number>> = [];
  for (let i = 0; i < 5; i++) {
    const set = parseField(parts[i]!, FIELDS[i]!);
    if (!set) return null;
    sets.push(set);
  }
  return (utc) => utc.every((v, i) => sets[i]!.has(v));
}

function utcFields(ms: number): number[] {
  const d = new Date(ms);
  return [d.getUTCMinutes(), d.getUTCHours(), d.getUTCDate(), d.getUTCMonth() + 1, d.getUTCDay()];
}

/** The scheduled minute (ms) of a delivery of `cron` carrying `scheduledTime`. */
export function scheduledMinute(cron: string, scheduledTime: number): number {
  const floor = Math.floor(scheduledTime / MINUTE_MS) * MINUTE_MS;
  const matches = cronMatcher(cron);
  if (!matches) return floor;
  for (let back = 0; back <= TICK_LOOKBACK_MINUTES; back++) {
    const minute = floor - back * MINUTE_MS;
    if (matches(utcFields(minute))) return minute;
  }
  return floor;
}
