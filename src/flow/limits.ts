/**
 * A connector's `limits` (SPEC section 17, docs/connectors.md "Limits"): at most `concurrency`
 * calls in flight, and a token bucket of `rate` (`N/s`, `N/m`, `N/h`) holding at most `burst`
 * tokens. Pure: the schema, the rules a schema cannot state (each refusal with its pointer), and
 * the row the scope keeps (src/ledger/connector-permits.ts).
 */
import { z } from "zod";
import type { ValidationError } from "../definitions/errors";

/** `N/s`, `N/m` or `N/h`: N a positive whole number without leading zeros (zero is refused by its own rule). */
export const RATE_PATTERN = /^(0|[1-9][0-9]{0,9})\/(s|m|h)$/;

export const MAX_CONCURRENCY = 1000;
/** The highest rate: 10,000 calls per second (whatever the period it is written in). */
export const MAX_RATE_PER_SECOND = 10_000;
/** `burst` is at most this many times the rate's N. */
export const MAX_BURST_FACTOR = 10;

const PERIOD_MS = { s: 1000, m: 60_000, h: 3_600_000 } as const;

export const ConnectorLimits = z
  .strictObject({
    concurrency: z
      .number()
      .int()
      .min(1, "at least 1 call in flight (leave `concurrency` out for no cap)")
      .max(MAX_CONCURRENCY, `at most ${MAX_CONCURRENCY} calls in flight`)
      .optional()
      .describe("at most this many calls through the connector in flight at once (1–1,000)"),
    rate: z
      .string()
      .regex(RATE_PATTERN, 'a rate as "N/s", "N/m" or "N/h", e.g. "10/s"')
      .optional()
      .describe("a token bucket: N calls per second, minute or hour (at most 10,000 per second)"),
    burst: z
      .number()
      .int()
      .min(1, "a burst of at least 1 call")
      .optional()
      .describe("the bucket's size: calls that may go at once after a quiet spell (1 to 10 × N; default N)"),
  })
  .describe(
    'flow control for every call through the connector, in this workspace (docs/connectors.md "Limits"): operational — ' +
      "not part of any workflow version, so an edit applies to every version at its next send",
  );

export type ConnectorLimits = z.output<typeof ConnectorLimits>;

/** The limits as the scope's row keeps them; null when they limit nothing. */
export interface ScopeLimits {
  concurrency: number | null;
  rate: { count: number; periodMs: number; burst: number } | null;
}

export function parseRate(rate: string): { count: number; periodMs: number } | null {
  const match = RATE_PATTERN.exec(rate);
  if (!match) return null;
  return { count: Number(match[1]), periodMs: PERIOD_MS[match[2] as keyof typeof PERIOD_MS] };
}

/** The rules the schema cannot state, each with its pointer (the schema's own refusals come first, from zod). */
export function checkLimits(limits: ConnectorLimits | undefined): ValidationError[] {
  if (!limits) return [];
  const errors: ValidationError[] = [];
  const rate = limits.rate === undefined ? null : parseRate(limits.rate);
  if (rate && rate.count === 0) {
    errors.push({
      pointer: "/limits/rate",
      code: "limits-rate-zero",
      message: `"${limits.rate}" lets nothing through; give N of at least 1`,
    });
  } else if (rate && (rate.count * 1000) / rate.periodMs > MAX_RATE_PER_SECOND) {
    errors.push({
      pointer: "/limits/rate",
      code: "limits-rate-too-high",
      message:
        `"${limits.rate}" is above ${MAX_RATE_PER_SECOND.toLocaleString("en")} calls per second; ` + "leave `rate` out for no rate limit",
    });
  }
  if (limits.burst !== undefined) {
    if (limits.rate === undefined) {
      errors.push({
        pointer: "/limits/burst",
        code: "limits-burst-without-rate",
        message: "`burst` is the size of the rate's bucket: give `rate` too",
      });
    } else if (rate && rate.count > 0 && limits.burst > MAX_BURST_FACTOR * rate.count) {
      errors.push({
        pointer: "/limits/burst",
        code: "limits-burst-too-high",
        message: `a burst of ${limits.burst} is above ${MAX_BURST_FACTOR} × ${rate.count} (the rate's N); lower it to at most ${
          MAX_BURST_FACTOR * rate.count
        }`,
      });
    }
  }
  return errors;
}

/** The scope's limits from a valid connector's `limits`; null: nothing is limited (no row). */
export function scopeLimitsOf(limits: ConnectorLimits | undefined): ScopeLimits | null {
  if (!limits) return null;
  const rate = limits.rate === undefined ? null : parseRate(limits.rate);
  const concurrency = limits.concurrency ?? null;
  if (concurrency === null && (rate === null || rate.count === 0)) return null;
  return {
    concurrency,
    rate: rate && rate.count > 0 ? { ...rate, burst: limits.burst ?? rate.count } : null,
  };
}
