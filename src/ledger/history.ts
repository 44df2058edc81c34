/**
 * History (SPEC section 12, docs/history.md): which finished executions may go, removing them
 * with everything that belongs to them, and what is left of them (a tombstone).
 *
 * The unit of removal is a **chain**: an execution with every execution linked to it by a start
 * over (`started_over_from`), a reuse after failure (`previous_execution_id`, `superseded_by`),
 * transitively. Those links are foreign keys, so a member removed alone would leave a retained
 * row pointing at nothing. A chain goes as one unit, when its last member is due; until then its
 * due members are held (`sweep_held_until`) and looked at again then.
 *
 * Everything is read and deleted by sets of ids (one bound JSON array, `json_each`), never one
 * statement per execution, and every removal is one batch: one round trip, one transaction.
 * Each of its statements re-checks the set under SQLite's write lock (`removableGuard`), so an
 * operator who reopened (retried) or started over a member between the selection and the removal
 * makes the whole batch a no-op, and the next pass decides again.
 */
import type { FinalExecutionStatus } from "./execution-types";
import { LabelledBatch } from "./batch";
import { erasedEventsSql } from "./events";
import { FORGETS_AT } from "./key-memory";
import { runBoundedDelete, type SweepSpec } from "./sweep";

/** An execution the sweep may remove, with what its tombstone and archive object need. */
export interface RemovableExecution {
  id: string;
  workspace: string;
  workflowId: string;
  /** A final status (COMPENSATED and COMPENSATION_FAILED are kept and tombstoned as a failure: migrations/0031). */
  status: FinalExecutionStatus;
  createdAt: number;
  finishedAt: number;
}

/** A chain whose members are not all due: its due members wait until `until`. */
export interface HeldChain {
  ids: string[];
  until: number;
}

export interface DueSelection {
  /** The members of the chains that may go now, chain by chain. */
  chains: RemovableExecution[][];
  /** Chains with a member still running, within its retention or inside its dedupe window. */
  held: HeldChain[];
  /** The number of due executions the selection started from (0: nothing is due). */
  candidates: number;
}

/** How far a chain is followed: a longer chain (hundreds of start overs) is held and reported. */
export const MAX_CHAIN_MEMBERS = 200;

/**
 * The most rows one walk from `roots` due executions returns: every member once, however many of
 * the roots share its chain (the walk carries no root), so `roots` chains of MAX_CHAIN_MEMBERS fit,
 * and one more row tells a longer one. A walk that reaches it may have stopped inside a chain, so
 * nothing it found is removed: its due members are held instead.
 */
const chainRowsLimit = (roots: number) => MAX_CHAIN_MEMBERS * Math.max(1, roots) + 1;

/** How long a chain with a RUNNING member is held before it is looked at again. */
export const RUNNING_CHAIN_RECHECK_MS = 3_600_000;

interface ChainRow {
  id: string;
  /** 1 when the walk started from it (a due execution the selection took). */
  root: number;
  started_over_from: string | null;
  previous_execution_id: string | null;
  superseded_by: string | null;
  workspace: string;
  workflow_id: string;
  status: string;
  created_at: number;
  finished_at: number | null;
  purge_at: number | null;
  identity_expires_at: number | null;
}

/**
 * Every member of the chains of `roots` (a recursive walk over the three links, both ways, using
 * the partial indexes of migrations 0009 and 0016), each once — the walk carries no root, so roots
 * of one chain walk it once, not once each — with its links (`groupChains` splits the members into
 * chains by them), its due time and, where its identity row still names it, the end of that window.
 * `roots`: a subquery or json_each naming ids as `id`; `limit`: the parameter bound to the row limit.
 */
function chainMembersSql(roots: string, limit: string): string {
  return `WITH RECURSIVE
    roots(id) AS (${roots}),
    chain(id) AS (
      SELECT id FROM roots
      UNION
      SELECT l.value FROM chain c JOIN executions e ON e.id = c.id,
             json_each(json_array(e.started_over_from, e.previous_execution_id, e.superseded_by)) l
      WHERE l.value IS NOT NULL
      UNION
      SELECT n.id FROM chain c JOIN executions n
        ON n.started_over_from = c.id OR n.previous_execution_id = c.id OR n.superseded_by = c.id
      LIMIT ${limit}
    )
    SELECT e.id, e.id IN (SELECT id FROM roots) AS root, e.started_over_from, e.previous_execution_id, e.superseded_by,
           e.workspace, e.workflow_id, e.status, e.created_at, e.finished_at, e.purge_at,
           (SELECT i.expires_at FROM execution_identities i WHERE i.identity = e.identity AND i.execution_id = e.id) AS identity_expires_at
    FROM chain c JOIN executions e ON e.id = c.id
    ORDER BY e.created_at, e.id`;
}

/**
 * `selectDueChains`: up to `limit` executions due at `now` (by the partial index on `purge_at`),
 * each with its chain, split into chains that may go and chains that must wait. One statement.
 */
export async function selectDueChains(db: D1Database, now: number, limit: number): Promise<DueSelection> {
  const roots = `SELECT id FROM executions WHERE purge_at IS NOT NULL AND purge_at <= ?1 ORDER BY purge_at LIMIT ?2`;
  const rowsLimit = chainRowsLimit(limit);
  const { results } = await db.prepare(chainMembersSql(roots, "?3")).bind(now, limit, rowsLimit).all<ChainRow>();
  const rows = results ?? [];
  return groupChains(rows, now, "retention", rows.length >= rowsLimit);
}

/**
 * `selectChainOf`: the chain of one execution of `workspace`, for an erasure: it may go when
 * every member is finished (retention does not matter). One statement; null when the execution
 * is not in this workspace.
 */
export async function selectChainOf(
  db: D1Database,
  workspace: string,
  executionId: string,
  now: number,
): Promise<{ chain: RemovableExecution[] | null; running: string[] } | null> {
  const roots = `SELECT id FROM executions WHERE id = ?1 AND workspace = ?2`;
  const rowsLimit = chainRowsLimit(1);
  const { results } = await db.prepare(chainMembersSql(roots, "?3")).bind(executionId, workspace, rowsLimit).all<ChainRow>();
  const rows = results ?? [];
  if (rows.length === 0) return null;
  const running = rows.filter((r) => r.finished_at === null).map((r) => r.id);
  const selection = groupChains(rows, now, "erased", rows.length >= rowsLimit);
  return { chain: selection.chains[0] ?? null, running };
}

/** The walk's members split into chains: the sets its links connect (union-find), members in the walk's order. */
function chainsOf(rows: ChainRow[]): ChainRow[][] {
  const parent = new Map<string, string>(rows.map((r) => [r.id, r.id]));
  const find = (id: string): string => {
    let at = id;
    while (parent.get(at) !== at) at = parent.get(at)!;
    parent.set(id, at);
    return at;
  };
  for (const row of rows) {
    for (const link of [row.started_over_from, row.previous_execution_id, row.superseded_by]) {
      // A link to a row the walk did not return (it stopped at its limit) joins nothing: the walk is held whole then.
      if (link !== null && parent.has(link)) parent.set(find(row.id), find(link));
    }
  }
  const byChain = new Map<string, ChainRow[]>();
  for (const row of rows) {
    const key = find(row.id);
    const members = byChain.get(key);
    if (members) members.push(row);
    else byChain.set(key, [row]);
  }
  return [...byChain.values()];
}

function groupChains(rows: ChainRow[], now: number, reason: RemovalReason, truncated: boolean): DueSelection {
  const chains: RemovableExecution[][] = [];
  const held: HeldChain[] = [];
  for (const members of chainsOf(rows)) {
    const until = truncated ? now + RUNNING_CHAIN_RECHECK_MS : holdUntil(members, now, reason);
    if (until === null) chains.push(members.map(removable));
    else held.push({ ids: members.filter((m) => m.purge_at !== null && m.purge_at <= now).map((m) => m.id), until });
  }
  return { chains, held, candidates: rows.filter((r) => r.root === 1).length };
}

/** When a chain may go (null: now). Retention: every member finished, due, and out of its window. */
function holdUntil(members: ChainRow[], now: number, reason: RemovalReason): number | null {
  if (members.length > MAX_CHAIN_MEMBERS) return now + RUNNING_CHAIN_RECHECK_MS;
  if (members.some((m) => m.finished_at === null || m.purge_at === null)) return now + RUNNING_CHAIN_RECHECK_MS;
  if (reason === "erased") return null;
  let until = now;
  for (const m of members) {
    until = Math.max(until, m.purge_at ?? now);
    if (m.identity_expires_at !== null && m.identity_expires_at > now) until = Math.max(until, m.identity_expires_at);
  }
  return until > now ? until : null;
}

function removable(row: ChainRow): RemovableExecution {
  return {
    id: row.id,
    workspace: row.workspace,
    workflowId: row.workflow_id,
    status: row.status as RemovableExecution["status"],
    createdAt: row.created_at,
    finishedAt: row.finished_at as number,
  };
}

/**
 * `holdChains`: the due members of chains that must wait are looked at again at their chain's
 * time (`purge_at` is never earlier than `sweep_held_until`). One statement for every chain.
 */
export async function holdChains(db: D1Database, held: HeldChain[]): Promise<number> {
  const pairs = held.flatMap((h) => h.ids.map((id) => [id, h.until]));
  if (pairs.length === 0) return 0;
  const result = await db
    .prepare(
      `UPDATE executions SET sweep_held_until = h.value ->> 1
       FROM json_each(?1) h
       WHERE executions.id = h.value ->> 0 AND executions.finished_at IS NOT NULL`,
    )
    .bind(JSON.stringify(pairs))
    .run();
  return result.meta.changes ?? 0;
}

export type RemovalReason = "retention" | "erased";

export interface RemovalReport {
  /** Executions removed (0 when the set changed under the batch: nothing was removed). */
  executions: number;
  steps: number;
  attempts: number;
  events: number;
  duplicates: number;
  /** Key sends born unguarded before migrations/0043 marked kept (none is deleted; later ones are born kept). */
  keySends: number;
}

/**
 * Binds: ?1 the ids (JSON array), ?2 now, ?3 the reason, ?4 the archived ids (JSON array), ?5 the
 * number of ids. True while every id is still an execution that may go for `reason` — finished
 * (and, for retention, due) — and no execution outside the set links to one inside it.
 */
const IDS = `(SELECT value FROM json_each(?1))`;
/** What an erasure does to the events the set took (binds as `removableGuard` does). */
const ERASED_EVENTS = erasedEventsSql(IDS, `(SELECT x.workspace FROM executions x WHERE x.id IN ${IDS})`, "?2");
const removableGuard = `(
  (SELECT count(*) FROM executions g WHERE g.id IN ${IDS} AND g.purge_at IS NOT NULL AND (?3 = 'erased' OR g.purge_at <= ?2)) = ?5
  AND NOT EXISTS (SELECT 1 FROM executions n WHERE n.started_over_from IN ${IDS} AND n.id NOT IN ${IDS})
  AND NOT EXISTS (SELECT 1 FROM executions n WHERE n.previous_execution_id IN ${IDS} AND n.id NOT IN ${IDS})
  AND NOT EXISTS (SELECT 1 FROM executions n WHERE n.superseded_by IN ${IDS} AND n.id NOT IN ${IDS}))`;

/**
 * `removeExecutions`: chains removed, children first — the tombstones, attempts, events,
 * duplicate records, the waits' registrations, steps, then the executions. Key sends stay (the
 * retention guard reads them), born kept (migrations/0043; older unguarded ones are marked kept). An erasure also deletes the
 * events only its executions took to a payload-free dedupe record (a broadcast another execution
 * took is kept whole: ./events.ts erasedEventsSql) and deletes their consumption records; a
 * retention sweep leaves both to the events sweep (`sweepEventsOnce`), so a sender's duplicate
 * still answers with the first delivery's outcome until the event itself goes. ONE batch; every statement carries the guard, so the
 * batch removes all of the set or nothing. A tombstone lives as long again as the execution's
 * retention for how it ended, so its id is not given to another run meanwhile.
 */
export async function removeExecutions(
  db: D1Database,
  ids: string[],
  now: number,
  reason: RemovalReason,
  archived: ReadonlySet<string> = new Set(),
): Promise<RemovalReport> {
  const empty = { executions: 0, steps: 0, attempts: 0, events: 0, duplicates: 0, keySends: 0 };
  if (ids.length === 0) return empty;
  const params = [JSON.stringify(ids), now, reason, JSON.stringify(ids.filter((id) => archived.has(id))), ids.length];
  const del = (sql: string) => db.prepare(`${sql} AND ${removableGuard}`).bind(...params);
  type Label =
    "tombstones" | "attempts" | "events" | "items" | "keySends" | "waits" | "erasedEvents" | "consumptions" | "identityValues" | "steps";
  const batch = new LabelledBatch<Label | "executions">(db);
  // An erasure only: the same values' hashes on the identity claim, kept for its dedupe window, are blanked (the claim stays).
  if (reason === "erased")
    batch.add(
      "identityValues",
      del(`UPDATE execution_identities SET value_hashes = NULL
           WHERE value_hashes IS NOT NULL AND execution_id IN ${IDS}
             AND identity IN (SELECT x.identity FROM executions x WHERE x.id IN ${IDS} AND x.identity IS NOT NULL)`),
    );
  const results = await batch
    .add(
      "tombstones",
      db
        .prepare(
          `INSERT INTO execution_tombstones
             (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at, value_hashes)
           SELECT e.id, e.workspace, e.workflow_id, e.status, e.created_at, e.finished_at, ?2, ?3,
                  CASE WHEN ?3 = 'retention' AND e.id IN (SELECT value FROM json_each(?4)) THEN 1 ELSE 0 END,
                  ?2 + CASE e.status WHEN 'COMPLETED' THEN e.retain_completed_ms WHEN 'CANCELLED' THEN e.retain_cancelled_ms
                                     ELSE e.retain_failed_ms END,
                  iif(?3 = 'retention', e.value_hashes, NULL)
           FROM executions e WHERE e.id IN ${IDS} AND ${removableGuard}
           ON CONFLICT (id) DO UPDATE SET removed_at = excluded.removed_at, reason = excluded.reason,
             archived = excluded.archived, expires_at = excluded.expires_at, value_hashes = excluded.value_hashes`,
        )
        .bind(...params),
    )
    .add("attempts", del(`DELETE FROM step_attempt_rows WHERE execution_id IN ${IDS}`))
    .add("events", del(`DELETE FROM step_events WHERE execution_id IN ${IDS}`))
    // Key sends outlive their execution, guarded or not: a later version that declares a retention
    // must still find the first send (docs/history.md "Destination key sends outlive their executions").
    // Since migrations/0043 every send is born kept (`guarded = 1`; one born unguarded waits for its
    // execution to go by itself: `unguarded`), so this writes nothing for it. A send born unguarded
    // before 0043 (`guarded = 0`) is marked kept here (aged by HISTORY_KEY_SENDS like the rest), by
    // a sweep and an erasure alike. Found by the keys of the set's steps and items (before they go,
    // below): a send's key is its step's or item's, written once; the send's primary key has
    // (workspace, key) first, so no index on `execution_id` is written per send (migrations/0033).
    .add(
      "keySends",
      del(`UPDATE destination_key_sends AS ks SET guarded = 1
           FROM (SELECT s.workspace, s.idempotency_key FROM steps s WHERE s.execution_id IN ${IDS} AND s.idempotency_key IS NOT NULL
                 UNION
                 SELECT w.workspace, w.idempotency_key FROM work_items w WHERE w.execution_id IN ${IDS} AND w.idempotency_key IS NOT NULL) k
           WHERE ks.workspace = k.workspace AND ks.idempotency_key = k.idempotency_key
             AND ks.guarded = 0 AND ks.execution_id IN ${IDS}`),
    )
    // A MAP's items go with their execution (their attempts and events are the rows above, under their row keys).
    .add("items", del(`DELETE FROM work_items WHERE execution_id IN ${IDS}`))
    .add("waits", del(`DELETE FROM event_waits WHERE execution_id IN ${IDS}`))
    // An erasure: the events only these executions took keep a payload-free dedupe record, a broadcast another
    // execution also took is kept whole, and these executions' consumptions go (./events.ts erasedEventsSql).
    .add("erasedEvents", del(`${ERASED_EVENTS.blank} AND ?3 = 'erased'`))
    .add("consumptions", del(`${ERASED_EVENTS.release} AND ?3 = 'erased'`))
    // The business values the search finds an execution by (migrations/0021): an erasure takes them
    // now; a retention removal leaves them to name the tombstone, whose sweep takes them (a trigger).
    // By primary key, from the hashes the execution keeps (migrations/0033).
    .add(
      "identityValues",
      del(`DELETE FROM identity_values WHERE ?3 = 'erased' AND (workspace, value_hash, created_at, execution_id) IN (
             SELECT x.workspace, v.value, x.created_at, x.id FROM executions x CROSS JOIN json_each(x.value_hashes) v
             WHERE x.id IN ${IDS})`),
    )
    .add("steps", del(`DELETE FROM steps WHERE execution_id IN ${IDS}`))
    // RETURNING, not `changes`: D1's count includes the counter trigger's update (migrations/0017).
    .add(
      "executions",
      db
        .prepare(
          `DELETE FROM executions WHERE id IN ${IDS} AND ${removableGuard}
           RETURNING id, coalesce(json_array_length(duplicate_log), 0) AS duplicates`,
        )
        .bind(...params),
    )
    .run();
  return {
    executions: results.rows("executions").length,
    steps: results.changes("steps"),
    attempts: results.changes("attempts"),
    events: results.changes("events"),
    // Kept in the execution's row (migrations/0024): gone with it.
    duplicates: results.rows<{ duplicates: number }>("executions").reduce((n, r) => n + r.duplicates, 0),
    keySends: results.changes("keySends"),
  };
}

/** What is left of a removed execution: what it was, and when and why it went. */
export interface Tombstone extends RemovableExecution {
  removedAt: number;
  reason: RemovalReason;
  archived: boolean;
}

/** `readTombstone`: the tombstone of `executionId` in `workspace` (another workspace's: null). */
export async function readTombstone(db: D1Database, workspace: string, executionId: string): Promise<Tombstone | null> {
  const row = await db
    .prepare(
      `SELECT id, workspace, workflow_id AS workflowId, status, created_at AS createdAt, finished_at AS finishedAt,
              removed_at AS removedAt, reason, archived
       FROM execution_tombstones WHERE id = ?1 AND workspace = ?2`,
    )
    .bind(executionId, workspace)
    .first<Omit<Tombstone, "archived"> & { archived: number }>();
  return row === null ? null : { ...row, archived: row.archived === 1 };
}

/** `executionRemoved`: whether execution `executionId` was removed (swept or erased) and its tombstone is still kept. */
export async function executionRemoved(db: D1Database, executionId: string): Promise<boolean> {
  return (await db.prepare("SELECT 1 AS removed FROM execution_tombstones WHERE id = ?1").bind(executionId).first("removed")) !== null;
}

/**
 * `markTombstoneErased`: an archived execution erased on request — its archive object is gone
 * (the caller deleted it first), the tombstone says so. Returns whether one was marked.
 */
export async function markTombstoneErased(db: D1Database, workspace: string, executionId: string, now: number): Promise<boolean> {
  const result = await db
    .prepare(
      `UPDATE execution_tombstones SET reason = 'erased', archived = 0, removed_at = ?3, expires_at = max(expires_at, ?3 + 1)
       WHERE id = ?1 AND workspace = ?2`,
    )
    .bind(executionId, workspace, now)
    .run();
  return (result.meta.changes ?? 0) > 0;
}

/** Tombstones past their time, and dead letters older than `deadLetterMaxAge`: bounded deletes. */
export async function sweepTombstonesOnce(db: D1Database, now: number, limit: number): Promise<number> {
  const result = await db
    .prepare(
      `DELETE FROM execution_tombstones WHERE id IN (
         SELECT id FROM execution_tombstones WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)`,
    )
    .bind(now, limit)
    .run();
  return result.meta.changes ?? 0;
}

/**
 * Events received at or before `olderThan` (EVENT_HISTORY: never shorter than the buffer or the
 * dedupe window), with the records of which waits took them: one batch, the same oldest rows in
 * both statements (one transaction). The waits themselves completed long before; their steps'
 * outputs keep the event.
 */
export async function sweepEventsOnce(db: D1Database, olderThan: number, limit: number): Promise<number> {
  const oldest = "SELECT rowid FROM events WHERE received_at <= ?1 ORDER BY received_at LIMIT ?2";
  const results = await new LabelledBatch<"consumptions" | "events">(db)
    .add("consumptions", db.prepare(`DELETE FROM event_consumptions WHERE event_rowid IN (${oldest})`).bind(olderThan, limit))
    .add("events", db.prepare(`DELETE FROM events WHERE rowid IN (${oldest})`).bind(olderThan, limit))
    .run();
  return results.changes("events");
}

/**
 * Kept key sends whose retention counts from before `olderThan` (HISTORY_KEY_SENDS set to a
 * duration), reached by the index of when their destination forgets them (migrations/0036
 * `destination_key_sends_cold_due`): a send with a declared retention goes up to that retention
 * later than the horizon — later, never earlier. A send born unguarded (migrations/0043) goes only
 * once the execution it names is gone, as when the removal marked it kept; it records its
 * execution's shortest retention, so the walk rarely meets one whose execution is still kept.
 */
export async function sweepKeySendsOnce(db: D1Database, olderThan: number, limit: number): Promise<number> {
  const result = await db
    .prepare(
      `DELETE FROM destination_key_sends WHERE (workspace, idempotency_key, destination) IN (
         SELECT workspace, idempotency_key, destination FROM destination_key_sends
         WHERE guarded = 1 AND ${FORGETS_AT} <= ?1
           AND (unguarded IS NULL OR NOT EXISTS (SELECT 1 FROM executions x WHERE x.id = destination_key_sends.execution_id))
         ORDER BY ${FORGETS_AT} LIMIT ?2)
       RETURNING 1 AS gone`,
    )
    .bind(olderThan, limit)
    .all();
  // RETURNING, not `changes`: D1's count includes the trigger that gives a kept step its steps_by_key entry back (migrations/0043).
  return result.results.length;
}

/** Dead letters recorded at or before `olderThan` (a rowid table: the shared bounded delete of ./sweep.ts). */
export function sweepDeadLettersOnce(db: D1Database, olderThan: number, limit: number): Promise<number> {
  return runBoundedDelete(db, DEAD_LETTERS_SWEEP, [olderThan], limit);
}

const DEAD_LETTERS_SWEEP: SweepSpec = { table: "dead_letters", where: "at <= ?1", orderBy: "at" };

/**
 * `claimSweepLease`: the lease of the sweep `name` for `holder` until `until`, unless another
 * holder's lease is live at `now`. One statement; true when the caller holds it.
 */
export async function claimSweepLease(db: D1Database, name: string, holder: string, now: number, until: number): Promise<boolean> {
  const row = await db
    .prepare(
      `INSERT INTO sweep_leases (name, holder, lease_until) VALUES (?1, ?2, ?4)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
         WHERE sweep_leases.lease_until <= ?3 OR sweep_leases.holder = excluded.holder
       RETURNING holder`,
    )
    .bind(name, holder, now, until)
    .first<{ holder: string }>();
  return row?.holder === holder;
}

/** `releaseSweepLease`: ends the holder's lease — free for anyone, whatever their clock (another holder's is left alone). */
export async function releaseSweepLease(db: D1Database, name: string, holder: string): Promise<void> {
  await db.prepare(`UPDATE sweep_leases SET lease_until = 0 WHERE name = ?1 AND holder = ?2`).bind(name, holder).run();
}

/**
 * `erasedMeanwhile`: of the ids a sweep just wrote to the archive, those whose rows are gone and
 * whose tombstone is not an archived retention removal — an erasure committed between the sweep's
 * read of the trace and its put (its deletion of the objects may have run before the put landed).
 * The archive deletes their objects (src/history/archive.ts). One statement, by primary keys.
 */
export async function erasedMeanwhile(db: D1Database, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { results } = await db
    .prepare(
      `SELECT j.value AS id FROM json_each(?1) j
       WHERE NOT EXISTS (SELECT 1 FROM executions x WHERE x.id = j.value)
         AND NOT EXISTS (SELECT 1 FROM execution_tombstones t WHERE t.id = j.value AND t.reason = 'retention' AND t.archived = 1)`,
    )
    .bind(JSON.stringify(ids))
    .all<{ id: string }>();
  return new Set(results.map((r) => r.id));
}
