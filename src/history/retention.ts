/**
 * The retention policy (SPEC section 12): how long a finished execution is kept, by how it ended.
 *
 * - The deployment's default: the HISTORY_COMPLETED / HISTORY_FAILED / HISTORY_CANCELLED vars
 *   (wrangler.toml; durations such as `7d`), else `DEFAULT_RETENTION` (7, 30 and 30 days).
 * - A workflow's `history` overrides it per status (validated at save by
 *   src/definitions/history-rules.ts: 1 minute to 365 days, never under the dedupe window).
 * - The effective retention, fixed when an execution starts, is never shorter than the entry
 *   point's dedupe window: a duplicate trigger inside the window must still find its execution,
 *   and the deployment's default can change (or be shorter) after the workflow was saved.
 *
 * A var that is not a duration, or is outside 1 minute to 365 days, falls back to the default
 * (as src/steps/chain.ts does with CHAIN_*) and is logged once per isolate and value as
 * `config.invalid_var` (docs/logging.md).
 */
import {
  DEFAULT_DEDUPE_WINDOW_MS,
  DURATION_PATTERN,
  durationMs,
  entryPointOf,
  MAX_DURATION_MS,
  MIN_HISTORY_MS,
  type WorkflowDefinition,
} from "../definitions/schema";
import type { ExecutionRetention } from "../ledger";
import { durationVar, reportOnce } from "../definitions/duration-vars";
import { ownMember } from "../lib/own-member";

/** Retention in ms per final status: what the start batch writes into the execution row. */
export type Retention = ExecutionRetention;

const DAY_MS = 86_400_000;

/** The deployment's default when its var is unset or invalid: completed 7 days, failed and cancelled 30 days. */
export const DEFAULT_RETENTION: Retention = Object.freeze({ completedMs: 7 * DAY_MS, failedMs: 30 * DAY_MS, cancelledMs: 30 * DAY_MS });

export interface HistoryVars {
  HISTORY_COMPLETED?: string;
  HISTORY_FAILED?: string;
  HISTORY_CANCELLED?: string;
}

/** Each var, the member of `Retention` it sets and the member of a definition's `history` that overrides it. */
const STATUSES = [
  { variable: "HISTORY_COMPLETED", member: "completedMs", override: "completed" },
  { variable: "HISTORY_FAILED", member: "failedMs", override: "failed" },
  { variable: "HISTORY_CANCELLED", member: "cancelledMs", override: "cancelled" },
] as const;

/** The deployment's default from its vars, each parsed once per isolate per value; an unset or empty var takes the default. */
export function deploymentRetention(vars: HistoryVars): Retention {
  const retention = { ...DEFAULT_RETENTION };
  for (const { variable, member } of STATUSES) retention[member] = durationVar(variable, vars[variable], DEFAULT_RETENTION[member]);
  return retention;
}

/**
 * The retention of an execution started now: per status, the workflow's `history` member where
 * set, else the deployment's, and never shorter than `dedupeWindowMs` (the entry point's window in
 * ms: `dedupeWindowMsOf`). A `history` member outside 1 minute to 365 days (refused at save, so
 * never in a stored version) is held to those bounds; one that is not a duration is ignored.
 */
export function effectiveRetention(
  history: { completed?: string | number; failed?: string | number; cancelled?: string | number } | undefined,
  deployment: Retention,
  dedupeWindowMs: number,
): Retention {
  const floor = Number.isFinite(dedupeWindowMs) && dedupeWindowMs > 0 ? dedupeWindowMs : 0;
  const retention = { ...deployment };
  for (const { member, override } of STATUSES) {
    const own = overrideMs(ownMember(history, override));
    retention[member] = Math.max(own ?? deployment[member], floor);
  }
  return retention;
}

/**
 * The entry point's dedupe window in ms, as an execution starts with it (src/ingress/start.ts):
 * `DEFAULT_DEDUPE_WINDOW_MS` (24h) when unset, at most `MAX_DURATION_MS`.
 */
export function dedupeWindowMsOf(definition: WorkflowDefinition): number {
  const window = entryPointOf(definition).config.dedupeWindow;
  return window === undefined ? DEFAULT_DEDUPE_WINDOW_MS : Math.min(durationMs(window), MAX_DURATION_MS);
}

/** `effectiveRetention` of a definition: its `history` and its entry point's window. */
export function retentionOf(definition: WorkflowDefinition, deployment: Retention): Retention {
  return effectiveRetention(definition.history, deployment, dedupeWindowMsOf(definition));
}

/** The shortest HISTORY_KEY_SENDS horizon: a guarded key's row must outlive any retention a destination states by far. */
export const MIN_KEY_SEND_HORIZON_MS = 30 * DAY_MS;

/**
 * How long a guarded key's first send is kept (HISTORY_KEY_SENDS): null for "forever" (the
 * default, also for an unset var and, logged, for a value that is not a duration of at least 30
 * days: the safe reading), else the horizon in ms.
 */
export function keySendHorizonMs(vars: { HISTORY_KEY_SENDS?: string }): number | null {
  const value: unknown = vars.HISTORY_KEY_SENDS;
  if (value === undefined || value === null || value === "" || value === "forever") return null;
  const text = String(value);
  if (DURATION_PATTERN.test(text) && durationMs(text) >= MIN_KEY_SEND_HORIZON_MS) return durationMs(text);
  reportOnce("HISTORY_KEY_SENDS", text, {
    variable: "HISTORY_KEY_SENDS",
    value: text.length > 100 ? `${text.slice(0, 100)}…` : text,
    fallback: "forever",
    message:
      `HISTORY_KEY_SENDS ${JSON.stringify(text)} is neither "forever" nor a duration of at least 30d; ` +
      "keeping guarded key sends forever",
  });
  return null;
}

/** A `history` member in ms, held to 1 minute–365 days; null when absent or not a duration. */
function overrideMs(value: unknown): number | null {
  let ms: number;
  if (typeof value === "number" && Number.isInteger(value) && value > 0) ms = value;
  else if (typeof value === "string" && DURATION_PATTERN.test(value)) ms = durationMs(value);
  else return null;
  return Math.min(Math.max(ms, MIN_HISTORY_MS), MAX_DURATION_MS);
}
