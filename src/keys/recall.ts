/**
 * The retention guard's cold lookup (docs/history.md "Key memory: hot and cold"). The hot row of a
 * key send is written before the first send (the key persist, the start's claimed step); when it
 * is this step's own — first sent no earlier than the step was created — the hot tier had nothing
 * older for the key, and the key may have been moved cold since. Then:
 * 1. the filter (src/keys/filter.ts): one D1 query; "absent" ends the lookup — no R2 read;
 * 2. the cold record (src/keys/cold.ts): one R2 `get`; its send to this destination, if any,
 *    unless `HISTORY_KEY_SENDS` has forgotten it on purpose;
 * 3. a send found is copied back onto the hot row (src/ledger `restoreColdSend`), so a retry, a
 *    takeover and an acknowledgement find it hot.
 * R2 unreachable, or the filter says "maybe" with no bucket bound: `ColdUnreachable` — the
 * gateway retries the step later and sends nothing (never blindly).
 */
import type { KeySend } from "../ledger";
import { restoreColdSend } from "../ledger/key-memory";
import { log } from "../lib/log";
import { coldSendTo, readColdRecord } from "./cold";
import { keyDigest, maybeCold } from "./filter";

export class ColdUnreachable extends Error {}

export interface RecallDeps {
  db: D1Database;
  bucket: R2Bucket | null;
  workspace: string;
  /** HISTORY_KEY_SENDS: a cold send counted from longer ago than this is forgotten on purpose; null: kept for good. */
  horizonMs: number | null;
  now: () => number;
  /** Counts R2 reads (tests, the bench). */
  onColdRead?: () => void;
}

/**
 * The send to use for the guard: `hot` when it predates the step (a hot hit), else the cold
 * record's when there is one (restored hot), else `hot`.
 */
export async function recallKeySend(
  deps: RecallDeps,
  key: string,
  destination: string,
  hot: KeySend,
  stepCreatedAt: number,
): Promise<KeySend> {
  if (hot.firstSentAt < stepCreatedAt) return hot;
  const digest = await keyDigest(deps.workspace, key);
  if ((await maybeCold(deps.db, [digest])).size === 0) return hot;
  if (deps.bucket === null) throw new ColdUnreachable("the filter may hold this key but no KEY_MEMORY bucket is bound");
  let cold;
  try {
    deps.onColdRead?.();
    cold = coldSendTo(await readColdRecord(deps.bucket, deps.workspace, digest.hash), destination);
  } catch (error) {
    throw new ColdUnreachable(`the cold key memory (R2) did not answer: ${error instanceof Error ? error.message : String(error)}`);
  }
  // Rare by design (a re-send across the hot period, or the filter's false positive): logged, counted by the soak.
  log.info("keys.cold_read", { workspace: deps.workspace, destination, found: cold !== null });
  if (cold === null || cold.firstSentAt >= hot.firstSentAt) return hot;
  if (deps.horizonMs !== null && cold.countedFrom <= deps.now() - deps.horizonMs) return hot;
  return (await restoreColdSend(deps.db, deps.workspace, key, destination, cold)) ?? cold;
}
