/**
 * The rules of a definition's `history` (SPEC section 12) that a JSON Schema cannot state: each
 * retention is at least one minute (`MIN_HISTORY_MS`), at most 365 days (`MAX_DURATION_MS`), and
 * never shorter than the entry point's `dedupeWindow` (default 24h): a duplicate trigger inside
 * the window must still find its execution, so the execution must outlive the window.
 *
 * The run-time side of the same floor is src/history/retention.ts (`effectiveRetention`): the
 * deployment's default can change after a save, so it is applied again when an execution starts.
 */
import { ownMember } from "../lib/own-member";
import { asArray, asRecord, type ValidationError } from "./errors";
import { pointerOf } from "./pointer";
import { DEFAULT_DEDUPE_WINDOW_MS, MAX_DURATION_MS, MIN_HISTORY_MS } from "./schema";
import { durationProblem, durationValueMs } from "./rule-helpers";

/** The members of `history`, in the order their errors are reported. */
export const HISTORY_STATUSES = ["completed", "failed", "cancelled"] as const;
export type HistoryStatus = (typeof HISTORY_STATUSES)[number];

export function checkHistory(document: unknown): ValidationError[] {
  const history = asRecord(ownMember(document, "history"));
  if (!history) return []; // absent, or not an object: the schema's to report
  const window = dedupeWindowOf(document);
  const errors: ValidationError[] = [];
  for (const status of HISTORY_STATUSES) {
    const value = ownMember(history, status);
    const ms = durationValueMs(value);
    if (ms === null) continue; // absent or not a duration: the schema's to report
    const name = `history.${status}`;
    const pointer = pointerOf("history", status);
    const shown = showDuration(value as string | number);
    const tooLong = durationProblem(value, name);
    if (tooLong) {
      errors.push({ pointer, ...tooLong });
    } else if (window !== null && ms < window.ms && window.ms >= MIN_HISTORY_MS) {
      // The stricter floor first: fixing to the window also satisfies the one-minute minimum.
      errors.push({
        pointer,
        code: "history-shorter-than-dedupe-window",
        message:
          `${name} ${shown} is shorter than the entry point's dedupeWindow ${window.shown}${window.unset ? " (the default)" : ""}: ` +
          `a duplicate trigger inside the window must still find its execution; set ${name} to at least ${window.shown} or ` +
          `${window.unset ? "set a shorter dedupeWindow" : "shorten dedupeWindow"}`,
      });
    } else if (ms < MIN_HISTORY_MS) {
      errors.push({
        pointer,
        code: "history-too-short",
        message:
          `${name} ${shown} is shorter than one minute, the shortest retention of a finished execution (the history sweep ` +
          `runs once a minute); set ${name} to \`1m\` or more, or remove it to keep the deployment's default`,
      });
    }
  }
  return errors;
}

/**
 * The entry point's dedupe window, in ms and as written (`24h` when unset); null
 * when there is not exactly one ENTRY_POINT or its window is not a duration (other rules report
 * those). A window over the maximum counts as the maximum, as when an execution starts
 * (src/ingress/start.ts): its own error is `duration-too-long` at the window.
 */
function dedupeWindowOf(document: unknown): { ms: number; shown: string; unset: boolean } | null {
  const entries = asArray(ownMember(document, "vertices")).filter((v) => ownMember(v, "type") === "ENTRY_POINT");
  if (entries.length !== 1) return null;
  const value = ownMember(ownMember(entries[0], "config"), "dedupeWindow");
  if (value === undefined) return { ms: DEFAULT_DEDUPE_WINDOW_MS, shown: "24h", unset: true };
  const ms = durationValueMs(value);
  if (ms === null) return null;
  return { ms: Math.min(ms, MAX_DURATION_MS), shown: showDuration(value as string | number), unset: false };
}

/** A duration as the author wrote it: `7d` as is, a number of ms as `86400000 ms`. */
function showDuration(value: string | number): string {
  return typeof value === "string" ? value : `${value} ms`;
}
