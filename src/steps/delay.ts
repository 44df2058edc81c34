/**
 * DELAY vertices (SPEC section 14, docs/waits.md): sleep for a duration, or until a time an
 * expression computes, holding nothing. The wake time is computed once — `for` from the step's
 * dispatch (its `created_at`, the same on every claim), `until` from the first run's evaluation —
 * and persisted with the park (`wake_at`), so a takeover or a resume never recomputes it. Its time
 * not come: the step parks until then (src/ledger/step-schedule.ts `parkStep`); come: it completes with
 * when it was meant to wake and when it did.
 */
import { durationMs, MAX_DURATION_MS, type DelayVertex } from "../definitions/schema";
import { evaluateValue } from "../expressions/evaluate";
import { isoTimeText } from "../lib/iso-time";
import { errorMessage } from "../lib/log";
import type { RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";

/** The longest delay a queue message can carry (Cloudflare Queues: 12 hours). Longer sleeps wake through cron. */
export const MAX_QUEUE_DELAY_MS = 12 * 3_600_000;

export interface DelayFacts {
  /** The wake time persisted by an earlier park of this step, if any. */
  wakeAt: number | null;
  /** When the step was dispatched: `for` counts from here. */
  stepCreatedAt: number | null;
  now: number;
}

export async function runDelay(vertex: DelayVertex, context: ExpressionContext, facts: DelayFacts): Promise<RunOutcome> {
  const wake = facts.wakeAt ?? (await wakeTime(vertex, context, facts));
  if (typeof wake === "string") return { kind: "failed", error: `delay ${vertex.id}: ${wake}` };
  if (wake <= facts.now) return { kind: "completed", output: { wakeAt: isoTimeText(wake), wokeAt: isoTimeText(facts.now) } };
  return { kind: "parked", until: wake, detail: `sleeping until ${isoTimeText(wake)}` };
}

/** The wake time (epoch ms), or why there is none (the step fails: the same inputs would give the same answer). */
async function wakeTime(vertex: DelayVertex, context: ExpressionContext, facts: DelayFacts): Promise<number | string> {
  const { config } = vertex;
  if (config.for !== undefined) return (facts.stepCreatedAt ?? facts.now) + durationMs(config.for);
  if (config.until === undefined) return "neither `for` nor `until` is set";
  let value: unknown;
  try {
    value = await evaluateValue(config.until, context);
  } catch (error) {
    return `\`until\` failed: ${errorMessage(error)}`;
  }
  const at = typeof value === "number" && Number.isSafeInteger(value) ? value : typeof value === "string" ? Date.parse(value) : NaN;
  if (!Number.isFinite(at)) {
    const gave = JSON.stringify(value) ?? "nothing";
    return `\`until\` gave ${gave}, not a time: return an ISO-8601 time (e.g. "2026-12-24T09:00:00Z") or epoch milliseconds`;
  }
  if (at - facts.now > MAX_DURATION_MS) {
    return `\`until\` is ${isoTimeText(at)}, more than 365 days ahead (the longest a step may sleep)`;
  }
  return at;
}
