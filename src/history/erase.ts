/**
 * Erasure on request (SPEC section 12, docs/history-archive.md): a finished execution removed from
 * D1 and from the archive. Its chain goes with it — every start over and reuse after failure linked
 * to it, which carry the same trigger payload (and are linked by foreign keys): an erasure that left
 * them would keep what was asked to be erased. A RUNNING member refuses the whole erasure. An
 * execution the sweep already removed: its archive objects are deleted and its tombstone says it was
 * erased. The HTTP route (src/http/routes/executions.ts) maps each outcome to its answer.
 */
import {
  eraseTakenEvents,
  forgetIdentityValues,
  markTombstoneErased,
  readTombstone,
  removeExecutions,
  selectChainOf,
  type RemovalReport,
  type Tombstone,
} from "../ledger";
import { log } from "../lib/log";
import { deleteArchivedTrace, deleteArchivedTraces } from "./archive";

export type ErasureOutcome =
  | { kind: "erased"; erased: string[]; archiveObjectsDeleted: number }
  | { kind: "not-found" }
  /** A member of the chain is RUNNING: cancel it first. */
  | { kind: "running"; running: string[] }
  /** The chain is longer than the ledger removes in one batch (`MAX_CHAIN_MEMBERS`). */
  | { kind: "chain-too-long" }
  /** The chain changed under every removal attempt (start overs racing the erasure). */
  | { kind: "conflict" }
  /** Removed earlier with an archived trace, and no bucket is bound to delete it from. */
  | { kind: "archive-unbound" };

/** Attempts at removing a chain that keeps changing under the removal's guard. */
const ROUNDS = 3;

export async function eraseExecution(
  db: D1Database,
  bucket: R2Bucket | undefined,
  workspace: string,
  executionId: string,
  now: () => number,
): Promise<ErasureOutcome> {
  for (let round = 0; round < ROUNDS; round++) {
    const at = now();
    const selected = await selectChainOf(db, workspace, executionId, at);
    if (selected === null) {
      const tombstone = await readTombstone(db, workspace, executionId);
      if (tombstone) return eraseRemoved(db, bucket, tombstone, at);
      // Removed so long ago that its tombstone is gone too: its archive objects may remain.
      const archiveObjectsDeleted = bucket ? await deleteArchivedTrace(bucket, { id: executionId, workspace, createdAt: 0 }) : 0;
      if (archiveObjectsDeleted === 0) return { kind: "not-found" };
      logErased(executionId, workspace, [executionId], archiveObjectsDeleted, { removedBy: "retention" });
      return { kind: "erased", erased: [executionId], archiveObjectsDeleted };
    }
    if (selected.running.length > 0) return { kind: "running", running: selected.running };
    if (!selected.chain) return { kind: "chain-too-long" };
    const ids = selected.chain.map((e) => e.id);
    const removal = await removeExecutions(db, ids, at, "erased");
    // The guard refused: the chain changed (a start over, a retry) between the read and the batch.
    if (removal.executions === 0) continue;
    // After the rows, so an object a sweep wrote before the removal goes too. A sweep's put still in
    // flight — its trace read before the removal — that lands after this is deleted by the sweep itself:
    // after its puts it checks for executions erased meanwhile (src/history/archive.ts).
    const archiveObjectsDeleted = bucket ? await deleteArchivedTraces(bucket, selected.chain) : 0;
    logErased(executionId, workspace, ids, archiveObjectsDeleted, { rows: removal });
    return { kind: "erased", erased: ids, archiveObjectsDeleted };
  }
  return { kind: "conflict" };
}

/**
 * An execution already swept: its tombstone says it was erased, then its archive objects go (in
 * that order: once the tombstone says erased, `GET` never serves the trace again, even if the
 * deletion fails and the erasure is sent again), the events it took are blanked as an erasure of a
 * kept execution blanks them (the history sweep leaves them to EVENT_HISTORY), and its business
 * values leave the search.
 */
async function eraseRemoved(db: D1Database, bucket: R2Bucket | undefined, tombstone: Tombstone, now: number): Promise<ErasureOutcome> {
  if (tombstone.archived && !bucket) return { kind: "archive-unbound" };
  if (tombstone.reason !== "erased") await markTombstoneErased(db, tombstone.workspace, tombstone.id, now);
  // Whatever the tombstone said: an object written by a sweep that lost the race to an erasure goes too.
  const archiveObjectsDeleted = bucket ? await deleteArchivedTrace(bucket, tombstone) : 0;
  // Erased before and nothing found now: the tombstone keeps the date of the first erasure.
  if (tombstone.reason === "erased" && archiveObjectsDeleted > 0) await markTombstoneErased(db, tombstone.workspace, tombstone.id, now);
  // The events it took (data included), still kept for EVENT_HISTORY: blanked, or kept whole when another execution took them too.
  await eraseTakenEvents(db, tombstone.workspace, tombstone.id, now);
  // The business values the search by business id still found it by (kept with the tombstone).
  await forgetIdentityValues(db, tombstone.workspace, tombstone.id);
  logErased(tombstone.id, tombstone.workspace, [tombstone.id], archiveObjectsDeleted, { removedBy: tombstone.reason });
  return { kind: "erased", erased: [tombstone.id], archiveObjectsDeleted };
}

function logErased(
  executionId: string,
  workspace: string,
  erased: string[],
  archiveObjectsDeleted: number,
  more: { rows: RemovalReport } | { removedBy: Tombstone["reason"] },
): void {
  const what =
    "rows" in more
      ? `${erased.length} execution${erased.length === 1 ? "" : "s"} of the chain of ${executionId}`
      : `execution ${executionId}, removed earlier (${more.removedBy})`;
  log.info("history.erased", { executionId, workspace, erased, archiveObjectsDeleted, ...more, message: `erased on request: ${what}` });
}
