/**
 * The search by business id (SPEC section 15, docs/ingress.md "Search by business id"): which
 * executions a business value or a destination key leads to — still kept, or removed by the history
 * sweep and known from their tombstones — and the destination keys they sent.
 *
 * Every lookup is by index, never a scan (test/search/query-plans.test.ts):
 * - a value: `identity_values` by (workspace, value hash) — rows written by the start batch
 *   (migrations/0024 `executions_identity_values`), kept until the execution's tombstone goes;
 * - a key: `destination_key_sends` by its primary key (the execution that sent it first to each
 *   destination: the one its step is found by — that step has no `steps_by_key` entry,
 *   migrations/0043 — and after the sweep, the one left to name), `steps` by (workspace, key) — the
 *   partial index `steps_by_key`: every other execution whose step persisted it (a start over, a
 *   retry, a later execution; and the first one again once its send row goes) —, and a MAP's items
 *   (undo steps) the same way (`work_items_by_key`);
 * - then each match's execution, or its tombstone, by primary key.
 *
 * The cost grows with the executions a value or key matches (each is read and sorted), not with the
 * workspace: a business id matches a handful (its windows, retries, start overs, test runs).
 */
import { LabelledBatch } from "./batch";
import { selectList, type Columns } from "./columns";
import { executionSummaryColumns, type ExecutionSummaryRecord } from "./execution-records";
import { listFlags, type ExecutionListFilter } from "./execution-list";
import type { RemovalReason } from "./history";
import type { FinalExecutionStatus } from "./execution-types";

/** What to look for; each list is bound as one JSON array. */
export type SearchTerm =
  /** The hashes of a value's readings (src/ingress/identity-values.ts). */
  | { by: "identity"; hashes: string[] }
  /** A key as sent, or every shape of a key `$idempotencyKey` makes (src/ingress/search-terms.ts). */
  | { by: "key"; keys: string[] };

/** A match the history sweep removed: what its tombstone keeps. */
export interface RemovedExecutionRecord {
  id: string;
  workflowId: string;
  status: FinalExecutionStatus;
  createdAt: number;
  finishedAt: number;
  removedAt: number;
  reason: RemovalReason;
  archived: boolean;
}

export type SearchHit = { live: ExecutionSummaryRecord } | { removed: RemovedExecutionRecord };

/** A destination key's first send to one destination, and the execution step that made it. */
export interface KeySendRecord {
  key: string;
  destination: string;
  firstSentAt: number;
  countedFrom: number;
  executionId: string;
  vertexId: string;
}

export interface SearchRecords {
  /** The page, newest first: `limit` matches at most. */
  hits: SearchHit[];
  /** Whether more matches follow the page (the next page starts after its last hit). */
  more: boolean;
  /** The searched key's sends, or the keys the page's executions sent (at most `SEARCH_KEYS_MAX`). */
  keys: KeySendRecord[];
}

/** The most key sends one answer lists. */
export const SEARCH_KEYS_MAX = 100;

interface HitRow extends ExecutionSummaryRecord {
  live: number;
  removedAt: number | null;
  removalReason: RemovalReason | null;
  archived: number | null;
}

/** A match's own columns where it lives, its tombstone's where it was removed; `id` the match's id. */
const hitColumns = (id: string) =>
  selectList<HitRow>({
    ...executionSummaryColumns("e", {
      id,
      workflowId: "coalesce(e.workflow_id, t.workflow_id)",
      status: "coalesce(e.status, t.status)",
      createdAt: "coalesce(e.created_at, t.created_at)",
      finishedAt: "coalesce(e.finished_at, t.finished_at)",
    }),
    live: "e.id IS NOT NULL",
    removedAt: "t.removed_at",
    removalReason: "t.reason",
    archived: "t.archived",
  } satisfies Columns<HitRow>);
const HIT_COLUMNS = hitColumns("m.id");

const KEY_SEND_COLUMNS = (alias: string) =>
  selectList<KeySendRecord>({
    key: `${alias}.idempotency_key`,
    destination: `${alias}.destination`,
    firstSentAt: `${alias}.first_sent_at`,
    countedFrom: `${alias}.counted_from`,
    executionId: `${alias}.execution_id`,
    vertexId: `${alias}.vertex_id`,
  });

/** The ids a key matches. Binds ?1 workspace, ?2 the keys' JSON array. */
function matchedIds(): string {
  // The `IS NOT NULL` and `IS NULL` let SQLite prove the partial indexes' WHERE. A step or item they
  // leave out (`key_first_send`, migrations/0043) is named by its key's send row, the third arm.
  return `SELECT s.execution_id AS id FROM steps s
          WHERE s.workspace = ?1 AND s.idempotency_key IN (SELECT value FROM json_each(?2)) AND s.idempotency_key IS NOT NULL
            AND s.key_first_send IS NULL
          UNION
          SELECT w.execution_id FROM work_items w
          WHERE w.workspace = ?1 AND w.idempotency_key IN (SELECT value FROM json_each(?2)) AND w.idempotency_key IS NOT NULL
            AND w.key_first_send IS NULL
          UNION
          SELECT ks.execution_id FROM destination_key_sends ks
          WHERE ks.workspace = ?1 AND ks.idempotency_key IN (SELECT value FROM json_each(?2))`;
}

const termValues = (term: SearchTerm): string => JSON.stringify(term.by === "identity" ? term.hashes : term.keys);

/**
 * The page of matches, newest first, keyset-paginated on (created_at, id) like the list: ONE
 * query. The list's other filters apply to what both a kept execution and a tombstone know
 * (workflow, status, creation time); `hadDuplicates` and `retried` need the execution's counters,
 * so a removed match never passes them. Exported for the query-plan test.
 */
export function searchQuery(workspace: string, term: SearchTerm, f: ExecutionListFilter): { sql: string; params: unknown[] } {
  if (term.by === "identity") return valuePageQuery(workspace, term.hashes, f);
  const params: unknown[] = [workspace, termValues(term)];
  const param = (value: unknown) => `?${params.push(value)}`;
  const created = "coalesce(e.created_at, t.created_at)";
  const where = ["(e.id IS NOT NULL OR t.id IS NOT NULL)"];
  if (f.workflowId !== undefined) where.push(`coalesce(e.workflow_id, t.workflow_id) = ${param(f.workflowId)}`);
  if (f.status !== undefined) where.push(`coalesce(e.status, t.status) = ${param(f.status)}`);
  if (f.since !== undefined) where.push(`${created} >= ${param(f.since)}`);
  if (f.until !== undefined) where.push(`${created} < ${param(f.until)}`);
  // Wrapped in coalesce: a bare test of e's columns would let SQLite turn the LEFT JOIN into an
  // inner one and walk the workspace's executions by the flag's index instead of the matches.
  const flags = listFlags("e.");
  if (f.hadDuplicates) where.push(`coalesce(${flags.hadDuplicates}, 0)`);
  if (f.retried) where.push(`coalesce(${flags.retried}, 0)`);
  if (f.before) {
    const at = param(f.before.createdAt);
    where.push(`(${created} < ${at} OR (${created} = ${at} AND m.id < ${param(f.before.id)}))`);
  }
  const sql =
    `WITH matched(id) AS (${matchedIds()}) ` +
    `SELECT ${HIT_COLUMNS} FROM matched m ` +
    `LEFT JOIN executions e ON e.id = m.id AND e.workspace = ?1 ` +
    `LEFT JOIN execution_tombstones t ON t.id = m.id AND t.workspace = ?1 ` +
    `WHERE ${where.join(" AND ")} ORDER BY ${created} DESC, m.id DESC LIMIT ${param(f.limit)}`;
  return { sql, params };
}

/**
 * A value's page: `identity_values` walked by its primary key (workspace, value_hash, created_at,
 * execution_id: migrations/0027) newest first from the cursor, each match's execution or tombstone
 * by primary key, stopping once the page is full — the rows read grow with the page, not with the
 * executions the value matches. One arm per hash (a value has at most two readings: `1001` the
 * string and the number), merged in order by the compound's ORDER BY; UNION drops an execution
 * both readings match. The creation-time filters and the cursor bound the walk; the others
 * (workflow, status, the counters' flags) are checked per match, so a page that skips many
 * matches reads them too.
 */
function valuePageQuery(workspace: string, hashes: string[], f: ExecutionListFilter): { sql: string; params: unknown[] } {
  const params: unknown[] = [workspace];
  const param = (value: unknown) => `?${params.push(value)}`;
  const shared: string[] = ["(e.id IS NOT NULL OR t.id IS NOT NULL)"];
  if (f.since !== undefined) shared.push(`v.created_at >= ${param(f.since)}`);
  if (f.until !== undefined) shared.push(`v.created_at < ${param(f.until)}`);
  if (f.before) shared.push(`(v.created_at, v.execution_id) < (${param(f.before.createdAt)}, ${param(f.before.id)})`);
  if (f.workflowId !== undefined) shared.push(`coalesce(e.workflow_id, t.workflow_id) = ${param(f.workflowId)}`);
  if (f.status !== undefined) shared.push(`coalesce(e.status, t.status) = ${param(f.status)}`);
  const flags = listFlags("e.");
  if (f.hadDuplicates) shared.push(`coalesce(${flags.hadDuplicates}, 0)`);
  if (f.retried) shared.push(`coalesce(${flags.retried}, 0)`);
  // No reading fits the index (the route refuses that first): an arm that matches nothing.
  const arms = (hashes.length > 0 ? hashes : [""]).map(
    (hash) =>
      `SELECT ${hitColumns("v.execution_id")}, v.created_at AS at FROM identity_values v ` +
      `LEFT JOIN executions e ON e.id = v.execution_id AND e.workspace = ?1 ` +
      `LEFT JOIN execution_tombstones t ON t.id = v.execution_id AND t.workspace = ?1 ` +
      `WHERE v.workspace = ?1 AND v.value_hash = ${param(hash)} AND ${shared.join(" AND ")}`,
  );
  return { sql: `${arms.join(" UNION ")} ORDER BY at DESC, id DESC LIMIT ${param(f.limit)}`, params };
}

/**
 * The keys to show beside the page. For a key: its sends on record, by the primary key — they
 * outlive the executions when the key is guarded. For a value: the keys the page's kept executions
 * sent (their steps by primary key, each key's sends by theirs). Binds ?1 workspace, ?2 the JSON
 * array (the keys, or the page's execution ids). Exported for the query-plan test.
 */
export function searchKeysQuery(term: SearchTerm): string {
  if (term.by === "key") {
    return `SELECT ${KEY_SEND_COLUMNS("ks")} FROM destination_key_sends ks
            WHERE ks.workspace = ?1 AND ks.idempotency_key IN (SELECT value FROM json_each(?2))
            ORDER BY ks.first_sent_at, ks.destination LIMIT ${SEARCH_KEYS_MAX}`;
  }
  // The page's ids outermost (CROSS JOIN), each execution's steps by their primary key: the unary
  // `+` keeps SQLite from walking the workspace's every keyed step by steps_by_key instead.
  return `SELECT DISTINCT ${KEY_SEND_COLUMNS("ks")} FROM json_each(?2) p
          CROSS JOIN steps s ON s.execution_id = p.value
          CROSS JOIN destination_key_sends ks ON ks.workspace = ?1 AND ks.idempotency_key = s.idempotency_key
          WHERE +s.workspace = ?1
          ORDER BY ks.first_sent_at, ks.destination LIMIT ${SEARCH_KEYS_MAX}`;
}

/**
 * `searchExecutions`: a page of what `term` matches in `workspace`, and the keys sent. A key's
 * search is one round trip (the page and the key's sends in one batch); a value's is two (the keys
 * of the page's executions need the page), the second only when the page holds a kept execution.
 */
export async function searchExecutions(
  db: D1Database,
  workspace: string,
  term: SearchTerm,
  f: ExecutionListFilter,
): Promise<SearchRecords> {
  // One more than the page: whether another page follows.
  const page = searchQuery(workspace, term, { ...f, limit: f.limit + 1 });
  const pageStatement = db.prepare(page.sql).bind(...page.params);
  const pageOf = (rows: HitRow[]) => ({ hits: rows.slice(0, f.limit).map(hitOf), more: rows.length > f.limit });
  if (term.by === "key") {
    const results = await new LabelledBatch<"page" | "keys">(db)
      .add("page", pageStatement)
      .add("keys", db.prepare(searchKeysQuery(term)).bind(workspace, termValues(term)))
      .run();
    return { ...pageOf(results.rows<HitRow>("page")), keys: results.rows<KeySendRecord>("keys") };
  }
  const found = pageOf((await pageStatement.all<HitRow>()).results ?? []);
  const live = found.hits.flatMap((hit) => ("live" in hit ? [hit.live.id] : []));
  if (live.length === 0) return { ...found, keys: [] };
  const { results } = await db.prepare(searchKeysQuery(term)).bind(workspace, JSON.stringify(live)).all<KeySendRecord>();
  return { ...found, keys: results ?? [] };
}

function hitOf(row: HitRow & { at?: number }): SearchHit {
  const { live, removedAt, removalReason, archived, at: _at, ...summary } = row;
  if (live === 1 || removedAt === null || removalReason === null) return { live: summary };
  return {
    removed: {
      id: summary.id,
      workflowId: summary.workflowId,
      status: summary.status as RemovedExecutionRecord["status"],
      createdAt: summary.createdAt,
      finishedAt: summary.finishedAt as number,
      removedAt,
      reason: removalReason,
      archived: archived === 1,
    },
  };
}

/**
 * `forgetIdentityValues`: the values of an execution erased after the history sweep had removed it
 * (its tombstone marked erased: src/history/erase.ts). An execution erased while kept loses them in
 * the removal batch itself (./history.ts). Returns the rows deleted.
 */
export async function forgetIdentityValues(db: D1Database, workspace: string, executionId: string): Promise<number> {
  // By primary key, from the hashes the tombstone keeps (migrations/0033); then the tombstone forgets them too.
  const [deleted] = await db.batch([
    db
      .prepare(
        `DELETE FROM identity_values WHERE (workspace, value_hash, created_at, execution_id) IN (
           SELECT t.workspace, v.value, t.created_at, t.id FROM execution_tombstones t CROSS JOIN json_each(t.value_hashes) v
           WHERE t.id = ?1 AND t.workspace = ?2)`,
      )
      .bind(executionId, workspace),
    db.prepare("UPDATE execution_tombstones SET value_hashes = NULL WHERE id = ?1 AND workspace = ?2").bind(executionId, workspace),
  ]);
  return deleted!.meta.changes ?? 0;
}
