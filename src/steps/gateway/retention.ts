/**
 * The retention guard: before a key is sent, is it older than the destination remembers keys?
 *
 * A destination keeps a key for its retention (Stripe at least 24 hours, Adyen 31 days, …), counted
 * from the first request that carried it. A re-send after that — a late retry, a takeover, an
 * operator retry days later, a start over — reaches a destination that may have forgotten the key
 * and take the request as new: the double charge the key exists to prevent. So when the step's
 * key declares a retention (src/definitions/destination-key.ts), every send checks the first send
 * on record for this workspace, key and destination (src/ledger `KeySend`, written when the key
 * was persisted) and refuses once the retention, less a margin, has passed. The step fails, not
 * retried: only a person can find out whether the first request took effect, and acknowledge the
 * re-send with an operator retry (which moves `countedFrom` to that retry).
 */
import { retentionMarginMs } from "../../definitions/destination-key";
import { ColdUnreachable } from "../../keys/recall";
import { KEY_MAY_BE_FORGOTTEN_MARK, type KeySend } from "../../ledger";
import { isoTimeText as iso } from "../../lib/iso-time";

/**
 * The cold lookup (src/keys/recall.ts): the key's first send from the cold tier when the hot row
 * is the step's own and the filter may hold the key — else `hot`. Null: fenced out. Throws
 * `ColdUnreachable` when the cold tier cannot answer.
 */
export type ColdRecall = (key: string, destination: string, hot: KeySend) => Promise<KeySend | null>;

/**
 * The send the guard judges: the hot row's, or — when the hot tier had nothing older than this
 * step — the cold tier's (docs/history.md "Key memory: hot and cold"). The cold tier unreachable:
 * retried later, nothing sent; a guarded key is never sent blindly.
 */
export async function guardedSend(
  recall: ColdRecall | undefined,
  vertexId: string,
  key: string,
  destination: string,
  hot: KeySend,
): Promise<{ send: KeySend } | { error: string; retry: boolean }> {
  if (recall === undefined) return { send: hot };
  try {
    const send = await recall(key, destination, hot);
    if (send === null) return { error: "the step was taken over while its key's first send was looked up; nothing was sent", retry: false };
    return { send };
  } catch (error) {
    if (!(error instanceof ColdUnreachable)) throw error;
    return {
      error:
        `gateway ${vertexId}: not sent: could not check whether key ${JSON.stringify(key)} was sent to ${destination} ` +
        `before (${error.message}); retried`,
      retry: true,
    };
  }
}

/** When the destination may forget the key: where its retention counts from, plus the retention. */
export function retentionDeadline(send: KeySend, retentionMs: number): number {
  return send.countedFrom + retentionMs;
}

export interface RetentionFacts {
  vertexId: string;
  key: string;
  /** The URL's origin the key goes to. */
  destination: string;
  send: KeySend;
  retentionMs: number;
  now: number;
}

/** Why the key must not be sent now, or null when the destination still remembers it. */
export function retentionRefusal(f: RetentionFacts): string | null {
  const deadline = retentionDeadline(f.send, f.retentionMs);
  if (f.now < deadline - retentionMarginMs(f.retentionMs)) return null;
  const acknowledged =
    f.send.countedFrom > f.send.firstSentAt ? `; an operator acknowledged a re-send at ${iso(f.send.countedFrom)}, counted from then` : "";
  return (
    `${KEY_MAY_BE_FORGOTTEN_MARK} (gateway ${f.vertexId}): key ${JSON.stringify(f.key)} was first sent to ${f.destination} ` +
    `at ${iso(f.send.firstSentAt)}${acknowledged}, and the destination remembers keys for ${duration(f.retentionMs)}, ` +
    `until ${iso(deadline)}. Sent now, it could be taken as a new request and, for a payment, charge again. ` +
    `Check at ${f.destination} whether the first request took effect (look it up by this key or by the business id). ` +
    'If it did not, retry this step with the body {"acknowledgeForgottenKey": true} to send the key once more; ' +
    "if it did, leave the step FAILED. Nothing was sent; not retried"
  );
}

/** A retention as people write it: the largest whole unit (31 days, 24 hours, 30 minutes), else ms. */
export function duration(ms: number): string {
  const units: Array<[string, number]> = [
    ["day", 86_400_000],
    ["hour", 3_600_000],
    ["minute", 60_000],
    ["second", 1_000],
  ];
  for (const [name, size] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${name}${ms / size === 1 ? "" : "s"}`;
  }
  return `${ms} ms`;
}
