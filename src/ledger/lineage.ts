/**
 * The live execution of a lineage (a trigger's executions and their start overs, or a forced run
 * and its start overs: docs/ledger.md "One live execution per trigger"), read by index without an
 * index entry for every execution (migrations/0039, issue 47 point 2).
 *
 * A lineage's members are of two kinds, and `executions_live_by_lineage` holds only the second:
 * - its head, whose `lineage_id` is its own id: a forced run (a test run, a stream run, a forced
 *   start) or a trigger's execution from before the window ids, whose id was its identity. Found
 *   by primary key (`id = lineage`), so it writes no index entry;
 * - every other member (`lineage_id <> id`): a trigger's execution (its lineage is its identity, a
 *   value that is no execution's id since the window ids), a reuse after failure, a start over.
 *   While live, each has an entry in the partial index `executions_live_by_lineage
 *   (lineage_id) WHERE lineage_id <> id AND status IN ('RUNNING', 'COMPENSATING')`.
 * The two lookups together are exactly "lineage_id = lineage AND live", each one indexed read.
 */
import { LIVE_STATUSES_SQL } from "./execution-types";

/**
 * A scalar subquery: the id of a live execution whose `lineage_id` is one of `lineages` (a SQL
 * list: `?1`, `e.lineage_id`, `?1, (SELECT …)`), other than `except` (an id expression) when
 * given; NULL when there is none. At most one is live (the gates of the claim, the start over and
 * the operator's retries), so which one a second would be does not matter. Its aliases (`lh`,
 * `ll`) are used nowhere else, so `lineages` and `except` may name the caller's tables.
 */
export function liveOfLineage(lineages: string, except?: string): string {
  const notHead = except === undefined ? "" : ` AND lh.id <> ${except}`;
  const notMember = except === undefined ? "" : ` AND ll.id <> ${except}`;
  return `coalesce(
      (SELECT lh.id FROM executions lh
       WHERE lh.id IN (${lineages}) AND lh.lineage_id = lh.id AND lh.status IN ${LIVE_STATUSES_SQL}${notHead} LIMIT 1),
      (SELECT ll.id FROM executions ll
       WHERE ll.lineage_id IN (${lineages}) AND ll.lineage_id <> ll.id AND ll.status IN ${LIVE_STATUSES_SQL}${notMember} LIMIT 1))`;
}
