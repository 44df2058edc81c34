/**
 * The one way the engine renders a time: milliseconds since 1970 as an ISO-8601 UTC timestamp
 * (`2026-12-03T10:00:00.000Z`), or null when there is none to show.
 *
 * `new Date(ms).toISOString()` throws a RangeError past ±8.64e15 ms, and prints a six-digit
 * signed year (`+275760-…`) past year 9999, which is not an RFC 3339 date-time. Every time a row
 * holds is rendered, including ones computed from a definition's durations (first send +
 * retention): a version saved before durations were bounded (src/definitions/schema.ts
 * `MAX_DURATION_MS`) can hold a retention of `Number.MAX_SAFE_INTEGER`, and one such time must
 * not make a whole trace answer 500. So a time outside years 0000–9999 is shown as null.
 */

/** 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the times a four-digit year can show. */
const EARLIEST_MS = -62_167_219_200_000;
const LATEST_MS = 253_402_300_799_999;

/** `ms` as an ISO-8601 UTC timestamp; null when absent, not finite, or outside years 0000–9999. */
export function isoTime(ms: number | null | undefined): string | null {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < EARLIEST_MS || ms > LATEST_MS) return null;
  return new Date(ms).toISOString();
}

/** `isoTime` for a sentence (an error, a log detail): a time it cannot show is said in words. */
export function isoTimeText(ms: number): string {
  return isoTime(ms) ?? `a time outside years 0000–9999 (${ms} ms since 1970)`;
}
