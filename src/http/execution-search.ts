/**
 * The answer of `GET /v1/executions` with a search (SPEC section 15, docs/ingress.md "Search by
 * business id"): the list's page shape — `items` (kept executions, as the list shows them) and
 * `nextCursor` — plus `removed` (matches the history sweep removed, from their tombstones) and
 * `keys` (the destination keys sent). One cursor pages through both kinds of match together.
 */
import { searchExecutions, type ExecutionListFilter, type KeySendRecord, type RemovedExecutionRecord, type SearchTerm } from "../ledger";
import { coldKeySends } from "../keys/search";
import { isoTime } from "../lib/iso-time";
import { encodeCursor, executionSummary, type ExecutionPage } from "../steps/trace";

export interface SearchPage extends ExecutionPage {
  removed: Array<ReturnType<typeof removedExecution>>;
  keys: Array<ReturnType<typeof keySend>>;
}

export async function searchPage(
  db: D1Database,
  workspace: string,
  term: SearchTerm,
  f: ExecutionListFilter,
  keyMemory: R2Bucket | null = null,
): Promise<SearchPage> {
  const { hits, more, keys: hot } = await searchExecutions(db, workspace, term, f);
  // A key moved to the cold tier (src/keys/search.ts) is still found; the cold tier unreachable, the hot sends only.
  const cold = term.by === "key" ? await coldKeySends(db, keyMemory, workspace, term.keys, hot).catch(() => []) : [];
  const keys = [...hot, ...cold];
  const last = hits.at(-1);
  const after = last ? ("live" in last ? last.live : last.removed) : null;
  return {
    items: hits.flatMap((hit) => ("live" in hit ? [executionSummary(hit.live)] : [])),
    nextCursor: more && after ? encodeCursor(after) : null,
    removed: hits.flatMap((hit) => ("removed" in hit ? [removedExecution(hit.removed)] : [])),
    keys: keys.map(keySend),
  };
}

function removedExecution(r: RemovedExecutionRecord) {
  return {
    executionId: r.id,
    workflowId: r.workflowId,
    status: r.status,
    createdAt: isoTime(r.createdAt),
    finishedAt: isoTime(r.finishedAt),
    removedAt: isoTime(r.removedAt),
    reason: r.reason,
    archived: r.archived,
  };
}

function keySend(k: KeySendRecord) {
  return {
    key: k.key,
    destination: k.destination,
    firstSentAt: isoTime(k.firstSentAt),
    countedFrom: isoTime(k.countedFrom),
    executionId: k.executionId,
    vertexId: k.vertexId,
  };
}
