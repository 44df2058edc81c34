/**
 * The answer of `GET /v1/executions` with a search (SPEC section 15, docs/ingress.md "Search by
 * business id"): the list's page shape — `items` (kept executions, as the list shows them) and
 * `nextCursor` — plus `removed` (matches the history sweep removed, from their tombstones) and
 * `keys` (the destination keys sent). One cursor pages through both kinds of match together.
 */
import { searchExecutions, type ExecutionListFilter, type KeySendRecord, type RemovedExecutionRecord, type SearchTerm } from "../ledger";
import { isoTime } from "../lib/iso-time";
import { encodeCursor, executionSummary, type ExecutionPage } from "../steps/trace";

export interface SearchPage extends ExecutionPage {
  removed: Array<ReturnType<typeof removedExecution>>;
  keys: Array<ReturnType<typeof keySend>>;
}

export async function searchPage(db: D1Database, workspace: string, term: SearchTerm, f: ExecutionListFilter): Promise<SearchPage> {
  const { hits, more, keys } = await searchExecutions(db, workspace, term, f);
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
