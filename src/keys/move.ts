/**
 * The move of kept key sends from D1 to the cold tier (docs/history.md "Key memory: hot and cold"),
 * a part of the history sweep (src/history/sweep.ts). One pass, at most `KEYS_PER_PASS` keys:
 * 1. one statement selects the due hot rows (src/ledger `selectColdDue`);
 * 2. one statement asks the filter which of their keys may already be cold (a key re-sent across
 *    its horizon and acknowledged, or sent to a second destination): those records are read (one
 *    R2 `get` each) and merged, the others written fresh;
 * 3. one R2 `put` per key (at most 6 at once: a Worker's connections); a failed put keeps its rows hot;
 * 4. one batch: the written keys' bits into the filter, its generation's count, and the delete of
 *    their hot rows (still due, still held by no step) — one transaction, so a key is always in the
 *    hot tier or in the filter, never in neither (the guard's probe reads the filter AFTER the hot
 *    row's upsert: ./recall.ts).
 * A send past `HISTORY_KEY_SENDS` is deleted without a cold record (forgotten on purpose, as before).
 * A crash between 3 and 4 leaves the objects beside their hot rows; the next pass writes them again.
 * Queries per pass: 1 select, 1 generation read + 1 filter probe (one batch), the final batch of 4
 * — `MOVE_PASS_QUERIES`.
 */
import { LabelledBatch } from "../ledger/batch";
import { deleteMovedKeySends, selectColdDue, type DueKeySend } from "../ledger/key-memory";
import { mergeSend, readColdRecord, writeColdRecord, type ColdRecord } from "./cold";
import { addToFilter, CURRENT_GENERATION_SQL, generationFor, keyDigest, MAYBE_COLD_SQL, type KeyDigest } from "./filter";

export const KEYS_PER_PASS = 100;
/** Index entries a pass may walk past that a step still holds. */
const SCAN_PER_PASS = 500;
export const MOVE_PASS_QUERIES = 7;
const PUT_CONCURRENCY = 6;

export interface MoveDeps {
  db: D1Database;
  bucket: R2Bucket;
  now: number;
  /** KEY_MEMORY_HOT. */
  hotMs: number;
  /** HISTORY_KEY_SENDS: null keeps every key for good. */
  horizonMs: number | null;
  onColdRead?: () => void;
}

export interface MoveReport {
  /** Hot rows moved cold (one per key and destination). */
  moved: number;
  /** Cold objects written (one per key). */
  written: number;
  /** Hot rows past HISTORY_KEY_SENDS, deleted without a cold record. */
  forgotten: number;
  /** Keys whose put failed: kept hot, tried again next pass. */
  failed: number;
  /** R2 reads of records already cold (merged). */
  coldReads: number;
  /** The pass selected a full batch: more may be due. */
  full: boolean;
}

interface Group {
  workspace: string;
  key: string;
  digest: KeyDigest;
  rows: DueKeySend[];
}

export async function moveKeySendsOnce(deps: MoveDeps, limit = KEYS_PER_PASS): Promise<MoveReport> {
  const countedBefore = deps.now - deps.hotMs;
  const due = await selectColdDue(deps.db, countedBefore, limit, SCAN_PER_PASS);
  const report: MoveReport = { moved: 0, written: 0, forgotten: 0, failed: 0, coldReads: 0, full: due.length >= limit };
  if (due.length === 0) return report;
  const horizon = deps.horizonMs;
  const forget = horizon === null ? [] : due.filter((r) => r.countedFrom <= deps.now - horizon);
  const keep = due.filter((r) => !forget.includes(r));

  const groups = new Map<string, Group>();
  for (const row of keep) {
    const id = JSON.stringify([row.workspace, row.key]);
    const group = groups.get(id) ?? { workspace: row.workspace, key: row.key, digest: await keyDigest(row.workspace, row.key), rows: [] };
    group.rows.push(row);
    groups.set(id, group);
  }
  const list = [...groups.values()];
  const probe = await new LabelledBatch<"gen" | "maybe">(deps.db)
    .add("gen", deps.db.prepare(CURRENT_GENERATION_SQL))
    .add("maybe", deps.db.prepare(MAYBE_COLD_SQL).bind(JSON.stringify(list.map((g) => [g.digest.block, ...g.digest.mask]))))
    .run();
  const maybe = new Set(probe.rows<{ i: number }>("maybe").map((r) => r.i));

  const written: Group[] = [];
  let next = 0;
  const worker = async () => {
    while (next < list.length) {
      const index = next++;
      const group = list[index];
      if (group === undefined) break;
      try {
        let record: ColdRecord | null = null;
        if (maybe.has(index)) {
          deps.onColdRead?.();
          report.coldReads += 1;
          record = await readColdRecord(deps.bucket, group.workspace, group.digest.hash);
        }
        record ??= { v: 1, keyHash: group.digest.hash, sends: [] };
        for (const row of group.rows) {
          record = mergeSend(record, {
            destination: row.destination,
            firstSentAt: row.firstSentAt,
            countedFrom: row.countedFrom,
            executionId: row.executionId,
            vertexId: row.vertexId,
          });
        }
        await writeColdRecord(deps.bucket, group.workspace, record);
        written.push(group);
      } catch {
        report.failed += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PUT_CONCURRENCY, list.length) }, worker));

  const digests = written.map((g) => g.digest);
  const rows = [...written.flatMap((g) => g.rows), ...forget].map((r) => [r.workspace, r.key, r.destination] as const);
  if (rows.length === 0) return report;
  const latest = probe.first<{ gen: number; keys: number }>("gen");
  const batch = new LabelledBatch<"filter" | "gens" | "delete">(deps.db);
  if (digests.length > 0) {
    const [filter, gens] = addToFilter(deps.db, digests, generationFor(latest, digests.length));
    batch.add("filter", filter).add("gens", gens);
  }
  const results = await batch.add("delete", deleteMovedKeySends(deps.db, rows, countedBefore)).run();
  const deleted = results.changes("delete");
  report.written = written.length;
  report.forgotten = Math.min(forget.length, deleted);
  report.moved = deleted - report.forgotten;
  return report;
}
