/**
 * A Gateway attempt through a limited connector (SPEC section 17, docs/connectors.md "Limits"):
 * ask for the scope's permit before anything is sent (a verify probe and its write share it), give
 * it back after the call — pausing the whole scope on a 429/503 with `Retry-After` — and, when it is
 * refused, say until when to wait and why. The statements are the ledger's
 * (src/ledger/connector-permits.ts); this module decides the times and the words.
 */
import type { GatewayVertex } from "../definitions/schema";
import { isoTime, isoTimeText } from "../lib/iso-time";
import type { Grant, PermitWait } from "../ledger/connector-permits";

/** The longest a refused step sleeps before it asks again (a release wakes the oldest waiter sooner). */
export const MAX_PERMIT_WAIT_MS = 30_000;

type Refused = Extract<Grant, { kind: "refused" }>;

/** The connector a resolved Gateway step goes through (its provenance, set at save), or null: an inline step is not limited. */
export function limitedConnectorOf(vertex: GatewayVertex): string | null {
  const connector = (vertex.config as { connector?: unknown }).connector;
  if (connector && typeof connector === "object" && typeof (connector as { name?: unknown }).name === "string") {
    return (connector as { name: string }).name;
  }
  return null;
}

/**
 * A refused ask whose turn comes within this is asked again from the same invocation after that
 * wait (at most `MAX_SHORT_WAITS` times) instead of parking: a queue delay is whole seconds, so a
 * park for a token due in 50 ms would cost a second and three round trips (docs/connectors.md "Limits").
 */
export const SHORT_WAIT_MS = 1000;
export const MAX_SHORT_WAITS = 3;

/**
 * How long to wait in the invocation before asking again, or null: park. Only for the bucket's next
 * token(s) — this step's and one for each waiter ahead of it — when a slot is free for it (a slot
 * frees when a call ends, which nobody can time: a release wakes the line's head for it) and the
 * scope is not paused.
 */
export function shortWaitMs(g: Refused): number | null {
  if (g.reason === "paused" || g.rate === null || g.tokens === null) return null;
  if (g.concurrency !== null && g.inFlight + g.ahead >= g.concurrency) return null;
  const waitMs = (Math.max(0, g.ahead + 1 - g.tokens) * g.rate.periodMs) / g.rate.count;
  return waitMs <= SHORT_WAIT_MS ? Math.max(1, Math.ceil(waitMs)) : null;
}

/** The longest a waiter behind others sleeps in a scope that caps concurrency: the releases wake the line. */
export const MAX_BEHIND_WAIT_MS = 300_000;

/**
 * The safety-net timer of a waiter behind others in a scope that caps concurrency: four times its
 * place in the line at the scope's pace (its rate, or one round of `concurrency` a second), 30 s to
 * 5 min, whole seconds — so a deep line is not woken by its own timers while the releases walk it.
 */
function behindWaitMs(g: Refused): number {
  const perSecond = Math.min(g.concurrency ?? Infinity, g.rate ? (g.rate.count * 1000) / g.rate.periodMs : Infinity);
  const ms = (4 * 1000 * (g.queued + 1)) / perSecond;
  return Math.ceil(Math.min(MAX_BEHIND_WAIT_MS, Math.max(MAX_PERMIT_WAIT_MS, ms)) / 1000) * 1000;
}

/**
 * When a refused step asks again: the pause's end; at the head of the line (nobody older waiting), the
 * bucket's next token or — waiting for a slot — the earliest live permit's lease end (1 s if none).
 * Behind others: in a scope that caps concurrency the line is woken from its head by every release
 * (`releasePermit` wakes as many waiters as can go, oldest first), so the timer is only a safety net
 * (`behindWaitMs`: 30 s – 5 min); without a cap, the bucket's token for its place in the whole line.
 * Whole seconds (a queue delay), 1–30 s but behind others in a capped scope; a pause is waited out to its end.
 */
export function permitWaitUntil(g: Refused, now: number): number {
  let waitMs: number;
  // The pause's end exactly (its wake-up message is delayed whole seconds, so it arrives at or after it).
  // Behind others in a capped scope, later still: the head wakes at the end and the releases walk the line.
  if (g.reason === "paused" && g.pausedUntil !== null) {
    const behind = g.concurrency !== null && g.queued > 0 ? now + behindWaitMs(g) : 0;
    return Math.max(g.pausedUntil, now + 1, behind);
  }
  if (g.concurrency !== null && g.queued > 0) return now + behindWaitMs(g);
  // From the whole line (`queued`), not only the waiters due soon: a deep line wakes each waiter about
  // when its turn comes, not every second (each refused wake-up is a claim, an ask and a park).
  if (g.rate && g.tokens !== null && g.tokens < g.queued + 1) {
    waitMs = ((g.queued + 1 - g.tokens) * g.rate.periodMs) / g.rate.count;
  } else {
    waitMs = 1000 * (1 + Math.floor(g.queued / (g.concurrency ?? 5)));
    if (g.nextFree !== null && g.queued < (g.concurrency ?? 5)) waitMs = Math.min(waitMs, Math.max(1000, g.nextFree - now));
  }
  const seconds = Math.min(MAX_PERMIT_WAIT_MS / 1000, Math.max(1, Math.ceil(waitMs / 1000)));
  return now + seconds * 1000;
}

/** Why a step waits, in the trace's words. */
export function refusalText(g: Refused): string {
  const behind = g.ahead > 0 ? ` (${g.ahead} waiting ahead)` : "";
  switch (g.reason) {
    case "paused":
      return `${g.pauseReason ?? "paused"}${g.pausedUntil !== null ? ` until ${isoTimeText(g.pausedUntil)}` : ""}`;
    case "rate":
      return `no token left at ${g.rate ? rateText(g.rate) : "its rate"}${behind}`;
    case "concurrency":
      return `every permit is in flight${behind}`;
    case "fairness":
      return `older waiters go first${behind}`;
  }
}

function rateText(rate: { count: number; periodMs: number }): string {
  return `${rate.count}/${rate.periodMs === 1000 ? "s" : rate.periodMs === 60_000 ? "m" : "h"}`;
}

/** The step's wait record (steps.permit_wait): `since` is its first refusal, kept across wake-ups. */
export function permitWaitOf(connector: string, g: Refused, until: number): PermitWait {
  return { connector, since: g.since, until, reason: refusalText(g) };
}

/** The trace's line for a step's permit wait: waiting now, or waited once granted. */
export function permitWaitLine(wait: PermitWait, now: number): string {
  if (wait.grantedAt !== undefined) {
    const seconds = ((wait.grantedAt - wait.since) / 1000).toFixed(1);
    return `waited ${seconds} s for ${wait.connector}: ${wait.reason}`;
  }
  const asks = wait.until > now ? `asks again at ${isoTimeText(wait.until)}` : `asking again since ${isoTimeText(wait.until)}`;
  return `waiting for a permit of ${wait.connector} since ${isoTimeText(wait.since)}: ${wait.reason}; ${asks}`;
}

/**
 * The shared pause a call's answer sets: a 429 or 503 with `Retry-After` pauses every send of the
 * scope until then (capped like the retry's Retry-After: `ceilingMs`). Null: no pause.
 */
export function pauseOf(
  outcome: { kind: string; retryAfterMs?: number; response?: { status: number } },
  now: number,
  ceilingMs: number,
): { until: number; reason: string } | null {
  const status = outcome.response?.status;
  if (outcome.kind !== "retryable" || (status !== 429 && status !== 503)) return null;
  if (outcome.retryAfterMs === undefined || outcome.retryAfterMs <= 0) return null;
  return { until: now + Math.min(outcome.retryAfterMs, ceilingMs), reason: `paused by a ${status} at ${isoTimeText(now)}` };
}

/** The trace's `permitWait` of a step (`steps.permit_wait`); null if it never waited (or the record is unreadable). */
export function permitWaitTrace(json: string | null, now: number) {
  if (json === null) return null;
  let wait: PermitWait;
  try {
    wait = JSON.parse(json) as PermitWait;
  } catch {
    return null;
  }
  return {
    connector: wait.connector,
    since: isoTime(wait.since),
    until: isoTime(wait.until),
    grantedAt: isoTime(wait.grantedAt ?? null),
    reason: wait.reason,
    text: permitWaitLine(wait, now),
  };
}
