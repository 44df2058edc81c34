/**
 * The move of kept key sends from D1 to the cold tier (docs/history.md "Key memory: hot and cold"),
 * a part of the history sweep (src/history/sweep.ts). One pass, at most `KEYS_PER_PASS` keys:
 * 1. one statement selects the due hot rows (src/ledger `selectColdDue`): those whose declared
 *    retention ended `KEY_MEMORY_HOT` ago or more (no retention on record: counted from then);
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
 * Queries per pass: the cursor's read, 1 select, 1 generation read + 1 filter probe (one batch),
 * the final batch of 4 (the cursor's save among them) — `MOVE_PASS_QUERIES`.
 * The scan walks the due index from a cursor (`key_move_cursor`): a send still held by a kept
 * execution is skipped and looked at again next cycle, so a long head of them (keys of FAILED
 * executions kept 30 days) never stalls the keys behind it.
 */
import { LabelledBatch } from "../ledger/batch";
import { deleteMovedKeySends, readMoveCursor, saveMoveCursor, selectColdDue, type DueKeySend, type MoveCursor } from "../ledger/key-memory";
import { mergeSend, readColdRecord, writeColdRecord, type ColdRecord } from "./cold";
import { addToFilter, CURRENT_GENERATION_SQL, generationFor, keyDigest, MAYBE_COLD_SQL, type KeyDigest } from "./filter";

export const KEYS_PER_PASS = 100;
/** Index entries a pass may walk past that a step still holds. */
const SCAN_PER_PASS = 500;
export const MOVE_PASS_QUERIES = 8;
const PUT_CONCURRENCY = 6;

export interface MoveDeps {
  db: D1Database;
  bucket: R2Bucket;
  now: number;
  /** KEY_MEMORY_HOT: how long past its declared retention's end a send stays hot (./memory.ts). */
  hotMs: number;
  /** HISTORY_KEY_SENDS: null keeps every key for good. */
  horizonMs: number | null;
  onColdRead?: () => void;
  /** Index entries one pass looks at (held ones included); `SCAN_PER_PASS` unless a test says. */
  scan?: number;
  /** Keys per filter generation; `KEYS_PER_GENERATION` unless a test says (./filter.ts `generationFor`). */
  generationKeys?: number;
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
  // Due: the destination forgot the key (its declared retention ended) KEY_MEMORY_HOT ago or more.
  const forgottenBy = deps.now - deps.hotMs;
  const after = await readMoveCursor(deps.db);
  const scan = deps.scan ?? SCAN_PER_PASS;
  const scanned = await selectColdDue(deps.db, forgottenBy, scan, after);
  // The first `limit` movable rows; the cursor goes to the last row looked at (past the held ones
  // before it), or back to the head when the scan reached the end of what is due.
  const due: DueKeySend[] = [];
  let last: DueKeySend | undefined;
  for (const row of scanned) {
    if (due.length >= limit) break;
    last = row;
    if (row.held === 0) due.push(row);
  }
  const more = due.length >= limit || scanned.length >= scan;
  const cursor: MoveCursor = more && last ? [last.forgetsAt, last.workspace, last.key, last.destination] : null;
  // A scan that began mid-way and reached the end wraps to the head: sends that came due behind the
  // cursor are next (`full`: the caller runs another pass).
  const report: MoveReport = { moved: 0, written: 0, forgotten: 0, failed: 0, coldReads: 0, full: more || after !== null };
  if (due.length === 0) {
    // Only held rows (or none): look further next pass, or start over from the head.
    if (after !== null || cursor !== null) await saveMoveCursor(deps.db, cursor).run();
    return report;
  }
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
            // No execution or vertex: the record keeps the key's existence, not who sent it (./cold.ts).
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
  // Every put failed (R2 down): the cursor stays, the rows are looked at again next pass.
  if (rows.length === 0) return report;
  const latest = probe.first<{ gen: number; keys: number }>("gen");
  const batch = new LabelledBatch<"filter" | "gens" | "delete" | "cursor">(deps.db);
  batch.add("cursor", saveMoveCursor(deps.db, report.failed > 0 ? after : cursor));
  if (digests.length > 0) {
    const [filter, gens] = addToFilter(deps.db, digests, generationFor(latest, digests.length, deps.generationKeys));
    batch.add("filter", filter).add("gens", gens);
  }
  const results = await batch.add("delete", deleteMovedKeySends(deps.db, rows, forgottenBy)).run();
  const deleted = results.changes("delete");
  report.written = written.length;
  report.forgotten = Math.min(forget.length, deleted);
  report.moved = deleted - report.forgotten;
  return report;
}
