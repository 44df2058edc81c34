/**
 * Per-vertex rules that a JSON Schema cannot state: a GET/HEAD call has no body, a literal URL is
 * an http(s) URL, headers are not given twice in different letter cases, retry delays are ordered,
 * a schedule is a cron string the deployment actually fires, a payload limit fits in D1, and no
 * duration is longer than `MAX_DURATION_MS`.
 */
import { asArray, asRecord, asString, type ValidationError } from "./errors";
import { pointerOf } from "./pointer";
import { DURATION_PATTERN, durationMs, isExpression, MAX_DURATION_MS, MAX_PAYLOAD_BYTES_LIMIT } from "./schema";

export interface VertexRuleOptions {
  /** The cron strings configured in wrangler.toml [triggers] crons, when known. */
  crons?: readonly string[];
}

/**
 * The most vertices a workflow may have. One queue invocation handles up to 10 step messages
 * (wrangler.toml `max_batch_size`), and a settle batch decides every descendant of the settling
 * vertex in one statement each; with the claim batch, the key write and a heartbeat every 10 s of
 * a call of up to 300 s, a message costs at most about V + 40 queries. D1 allows 1,000 queries per
 * Worker invocation (SPEC section 11): 10 × (50 + 40) stays under it.
 */
export const MAX_VERTICES = 50;

export function checkVertexRules(document: unknown, options: VertexRuleOptions = {}): ValidationError[] {
  const errors: ValidationError[] = [];
  const count = asArray(asRecord(document)?.vertices).length;
  if (count > MAX_VERTICES) {
    errors.push({
      pointer: "/vertices",
      code: "too-many-vertices",
      message:
        `the workflow has ${count} vertices, more than ${MAX_VERTICES}: a queue invocation settles up to 10 steps, each deciding ` +
        `every descendant in its own statement, ` +
        "and D1 allows 1,000 queries per Worker invocation; split the workflow in two (the first one's last step can trigger the second)",
    });
  }
  asArray(asRecord(document)?.vertices).forEach((raw, i) => {
    const vertex = asRecord(raw);
    const config = asRecord(vertex?.config);
    if (!config) return;
    const at = (...path: Array<string | number>) => pointerOf("vertices", i, "config", ...path);

    if (vertex?.type === "GATEWAY") {
      const retention = durationProblem(asRecord(config.idempotencyKey)?.retention, "idempotencyKey.retention");
      if (retention) errors.push({ pointer: at("idempotencyKey", "retention"), ...retention });
      const method = asString(config.method);
      if ((method === "GET" || method === "HEAD") && config.body !== undefined) {
        errors.push({
          pointer: at("body"),
          code: "body-not-allowed",
          message: `a ${method} request cannot carry a body; remove \`body\` or use POST/PUT/PATCH`,
        });
      }
      const urlError = literalUrlError(config.url, at("url"), "http://localhost:8788/payments/charges");
      if (urlError) errors.push(urlError);
      const seen = new Map<string, string>();
      for (const name of Object.keys(asRecord(config.headers) ?? {})) {
        const first = seen.get(name.toLowerCase());
        if (first !== undefined) {
          errors.push({
            pointer: at("headers", name),
            code: "duplicate-header",
            message: `header names are case-insensitive and "${first}" is already set; keep one of them`,
          });
        } else seen.set(name.toLowerCase(), name);
      }
      const retry = asRecord(config.retry);
      if (
        retry &&
        typeof retry.initialDelayMs === "number" &&
        typeof retry.maxDelayMs === "number" &&
        retry.maxDelayMs < retry.initialDelayMs
      ) {
        errors.push({
          pointer: at("retry", "maxDelayMs"),
          code: "retry-delay-order",
          message:
            `maxDelayMs (${retry.maxDelayMs}) is below initialDelayMs (${retry.initialDelayMs}); raise maxDelayMs or lower ` +
            `initialDelayMs`,
        });
      }
    }

    if (vertex?.type === "DELAY") {
      const given = ["for", "until"].filter((name) => config[name] !== undefined);
      if (given.length !== 1) {
        errors.push({
          pointer: at(),
          code: "delay-for-or-until",
          message:
            given.length === 0
              ? 'a DELAY needs `for` (a duration, e.g. "3d") or `until` (an expression giving the time to wake)'
              : "a DELAY takes `for` or `until`, not both; keep one",
        });
      }
      const sleep = durationProblem(config.for, "for");
      if (sleep) errors.push({ pointer: at("for"), ...sleep });
    }

    if (vertex?.type === "WAIT_FOR_EVENT") {
      const timeout = durationProblem(config.timeout, "timeout");
      if (timeout) errors.push({ pointer: at("timeout"), ...timeout });
      const decisions = Array.isArray(config.decisions) ? config.decisions : [];
      const seen = new Set<unknown>();
      decisions.forEach((decision, i) => {
        if (seen.has(decision))
          errors.push({ pointer: at("decisions", i), code: "duplicate-decision", message: `"${String(decision)}" is listed twice` });
        seen.add(decision);
      });
    }

    if (vertex?.type === "ENTRY_POINT") {
      const window = durationProblem(config.dedupeWindow, "dedupeWindow");
      if (window) errors.push({ pointer: at("dedupeWindow"), ...window });
      if (typeof config.maxPayloadBytes === "number" && config.maxPayloadBytes > MAX_PAYLOAD_BYTES_LIMIT) {
        errors.push({
          pointer: at("maxPayloadBytes"),
          code: "limit-above-d1",
          message:
            `maxPayloadBytes ${config.maxPayloadBytes} is above ${MAX_PAYLOAD_BYTES_LIMIT} (1 MiB), the most D1 can hold: the ` +
            `payload is stored in one row ` +
            "and loaded beside the outputs a step reads, and D1 refuses rows over 2,000,000 bytes; set it to 1048576 or less (or " +
            "leave it out for the 1 MiB default)",
        });
      }
      const schedule = asString(config.schedule);
      if (schedule !== undefined) {
        if (schedule.trim().split(/\s+/).length !== 5) {
          errors.push({
            pointer: at("schedule"),
            code: "invalid-cron",
            message: `"${schedule}" is not a cron string of 5 fields (minute hour day-of-month month day-of-week), e.g. "0 9 * * *"`,
          });
        } else if (options.crons && !options.crons.includes(schedule)) {
          errors.push({
            pointer: at("schedule"),
            code: "schedule-not-configured",
            message:
              `the cron "${schedule}" is not among this deployment's Cron Triggers ` +
              `(${options.crons.map((c) => `"${c}"`).join(", ") || "none"}); ` +
              "add it to wrangler.toml [triggers] crons and deploy, or use one of those",
          });
        }
      }
    }
  });
  return errors;
}

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
