/**
 * The key memory's cold tier (docs/history.md "Key memory: hot and cold"): one small R2 object per
 * key and workspace, `keys/{workspace}/{sha256(workspace NUL key)}.json`, in the `KEY_MEMORY`
 * bucket. It holds what the retention guard and the search need — each destination the key went
 * to, when it was first sent there and where its retention counts from — and nothing else: the
 * key's existence. Never the key itself (a key built from a business value in clear,
 * `charge-A-1001`, stays in the hot row only), and never the execution that sent it: an erasure of
 * that execution, later, could not find the record to blank it (the execution's steps, which name
 * its keys, went with it), so the record never holds it. An object written before (with
 * `executionId`/`vertexId`) is read without them and rewritten without them by any merge.
 *
 * Reads and writes throw when R2 does: the guard then refuses to send (./recall.ts) and the move
 * keeps the hot row (./move.ts). A missing object is null.
 */
import type { KeySend } from "../ledger";

export interface ColdSend extends KeySend {
  destination: string;
}

export interface ColdRecord {
  v: 1;
  /** SHA-256 of workspace NUL key (src/keys/filter.ts `keyDigest`). */
  keyHash: string;
  /** One entry per destination (an array: a destination is user data, never a property name). */
  sends: ColdSend[];
}

/** The object that holds the key of digest `hash` in `workspace`. */
export function coldObjectName(workspace: string, hash: string): string {
  return `keys/${encodeURIComponent(workspace)}/${hash}.json`;
}

/** The record of `hash` in `workspace`, or null when none was ever moved. Throws when R2 does. */
export async function readColdRecord(bucket: R2Bucket, workspace: string, hash: string): Promise<ColdRecord | null> {
  const object = await bucket.get(coldObjectName(workspace, hash));
  if (object === null) return null;
  return parseColdRecord(await object.text(), hash);
}

export async function writeColdRecord(bucket: R2Bucket, workspace: string, record: ColdRecord): Promise<void> {
  await bucket.put(coldObjectName(workspace, record.keyHash), JSON.stringify(record), {
    httpMetadata: { contentType: "application/json" },
  });
}

/** A stored record, or an empty one for an unreadable object (its sends are then taken from the hot rows). */
export function parseColdRecord(text: string, hash: string): ColdRecord {
  const record: ColdRecord = { v: 1, keyHash: hash, sends: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return record;
  }
  const sends = (parsed as { sends?: unknown })?.sends;
  if (!Array.isArray(sends)) return record;
  for (const s of sends as Array<Record<string, unknown>>) {
    if (typeof s?.destination !== "string" || typeof s.firstSentAt !== "number" || typeof s.countedFrom !== "number") continue;
    record.sends.push({
      destination: s.destination,
      firstSentAt: s.firstSentAt,
      countedFrom: s.countedFrom,
    });
  }
  return record;
}

/** The send to `destination` on record, if any. */
export function coldSendTo(record: ColdRecord | null, destination: string): ColdSend | null {
  return record?.sends.find((s) => s.destination === destination) ?? null;
}

/**
 * `mergeSend`: the record with `send` for its destination. The older first send wins: a hot row
 * that incorporates the cold one (the guard copied it back: ./recall.ts) is as old and carries any
 * acknowledgement since, so it replaces it; a hot row first sent later (written without the cold
 * record in view) never makes the record younger.
 */
export function mergeSend(record: ColdRecord, send: ColdSend): ColdRecord {
  const others = record.sends.filter((s) => s.destination !== send.destination);
  const prior = coldSendTo(record, send.destination);
  const kept = prior !== null && prior.firstSentAt < send.firstSentAt ? prior : send;
  return { ...record, sends: [...others, kept] };
}
