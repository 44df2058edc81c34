/**
 * `?destinationKey=` after the move (docs/history.md "Key memory: hot and cold"): a searched key
 * with no send left in D1 is looked up in the cold tier — the filter first (one query for every
 * shape of the key the search tries), then one R2 `get` per shape the filter may hold. The record
 * names no key (a hash): the search answers with the key it was asked for. Nor an execution
 * (./cold.ts): `executionId` and `vertexId` read as "" — the key's existence, its destination and
 * its times.
 */
import type { KeySendRecord } from "../ledger";
import { readColdRecord } from "./cold";
import { keyDigest, maybeCold } from "./filter";

/** The cold sends of `keys` in `workspace` that `hot` does not already name. R2 errors propagate. */
export async function coldKeySends(
  db: D1Database,
  bucket: R2Bucket | null,
  workspace: string,
  keys: readonly string[],
  hot: readonly KeySendRecord[],
): Promise<KeySendRecord[]> {
  const missing = [...new Set(keys)].filter((key) => !hot.some((h) => h.key === key));
  if (bucket === null || missing.length === 0) return [];
  const digests = await Promise.all(missing.map((key) => keyDigest(workspace, key)));
  const maybe = await maybeCold(db, digests);
  const found: KeySendRecord[] = [];
  for (const i of [...maybe].sort((a, b) => a - b)) {
    const digest = digests[i];
    const key = missing[i];
    if (digest === undefined || key === undefined) continue;
    const record = await readColdRecord(bucket, workspace, digest.hash);
    for (const send of record?.sends ?? []) {
      found.push({
        key,
        destination: send.destination,
        firstSentAt: send.firstSentAt,
        countedFrom: send.countedFrom,
        executionId: "",
        vertexId: "",
      });
    }
  }
  return found;
}
