/**
 * What the per-type save-time rules share (src/definitions/vertex-types): the shape of a type's
 * rules, and the checks more than one of them makes — a duration no longer than
 * `MAX_DURATION_MS`, a literal URL that is an absolute http(s) URL.
 */
import { asString, type ValidationError } from "./errors";
import { DURATION_PATTERN, durationMs, isExpression, MAX_DURATION_MS } from "./schema";

export interface VertexRuleOptions {
  /** The cron strings configured in wrangler.toml [triggers] crons, when known. */
  crons?: readonly string[];
}

/** A JSON Pointer into the vertex's `config` (`at("retry", "maxDelayMs")`). */
export type ConfigPointer = (...path: Array<string | number>) => string;

/** One vertex type's save-time rules over its (already schema-checked or not) config: every error, with its pointer. */
export type VertexRules = (config: Record<string, unknown>, at: ConfigPointer, options: VertexRuleOptions) => ValidationError[];

/**
 * A duration (ms, or `7d`) longer than `MAX_DURATION_MS`, as a code and message; a value the schema
 * refuses is the schema's to report. Checked here rather than in the schema: a stored version with
 * a longer one must still parse (src/definitions/schema.ts `MAX_DURATION_MS`).
 */
export function durationProblem(value: unknown, name: string): { code: string; message: string } | null {
  const ms = durationValueMs(value);
  if (ms === null || ms <= MAX_DURATION_MS) return null;
  return {
    code: "duration-too-long",
    message:
      `${name} ${JSON.stringify(value)} is longer than ${MAX_DURATION_MS / 86_400_000} days (${MAX_DURATION_MS} ms), ` +
      "the longest duration a definition may set; set `365d` or less",
  };
}

/**
 * A duration as the schema accepts it (a positive integer of ms, or `7d`), in ms; else null (the
 * schema reports it). An integer past 2^53 counts: it is refused as too long.
 */
export function durationValueMs(value: unknown): number | null {
  if (typeof value === "number") return Number.isInteger(value) && value > 0 ? value : null;
  if (typeof value === "string" && DURATION_PATTERN.test(value)) {
    const ms = durationMs(value);
    return ms > 0 ? ms : null;
  }
  return null;
}

/** A literal URL that is not an absolute http(s) URL, as an error at `pointer`; an expression is checked when it runs. */
export function literalUrlError(value: unknown, pointer: string, example: string): ValidationError | null {
  const url = asString(value);
  if (url === undefined || isExpression(url) || isHttpUrl(url)) return null;
  return {
    pointer,
    code: "invalid-url",
    message: `"${url}" is not an absolute http(s) URL; write one such as ${example}, or an expression starting with \`=\``,
  };
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}
