/**
 * Events and the waits that take them (SPEC section 14, docs/waits.md; migration 0020).
 *
 * Two writers meet here, each in ONE batch — one transaction on the workspace's shard — and each
 * looks for the other inside it, so whichever commits second sees the first:
 *
 * - `deliverEvent` (POST /v1/events, an event source): insert the event, or count a duplicate;
 *   give it to the waits registered for it (the oldest `one` wait, every `all` wait); mark it
 *   consumed; un-park those steps. Nothing taken: the event stays buffered until
 *   `buffered_until`.
 * - `registerWait` (a WAIT_FOR_EVENT step's claim): register the wait (or keep the registration
 *   this claim's earlier run made); take the oldest buffered event that matches; or mark the wait
 *   timed out when its timeout passed with nothing taken; then read what the wait has.
 *
 * A wait takes at most one event (`event_consumptions.wait_key` is its primary key), an event
 * taken once never returns to the buffer, and `timed_out` and a consumption exclude each other
 * under the write lock: a timeout racing an event has one outcome.
 */
import { LabelledBatch } from "./batch";
import { fenceParams, STEP_FENCE, UNPARK_NOW, type Fence, type StepRef } from "./step-sql";

export interface NewEvent {
  workspace: string;
  /** `id:<sender's id>` or `content:<sha256>` (see src/events/ingest.ts). */
  eventKey: string;
  /** A content key is retired once older than this, so identical events a window apart are two events. Null: an id key. */
  contentWindowMs: number | null;
  eventId: string;
  name: string;
  matchHash: string;
  /** The correlation value as canonical JSON (display only; `matchHash` is what compares). */
  matchValue: string;
  /** Canonical JSON of the data, or null. */
  data: string | null;
  source: string | null;
  now: number;
  bufferedUntil: number;
  /** Random per delivery: the statements after the insert act only if this delivery inserted the row. */
  nonce: string;
}

export interface DeliveredEvent {
  eventId: string;
  /** False: this delivery inserted the event. True: an earlier one did (this is a duplicate). */
  duplicate: boolean;
  receivedAt: number;
  bufferedUntil: number;
  duplicates: number;
  /** Executions the FIRST delivery resumed (a duplicate answers with them). */
  resumed: string[];
  /** Every execution that has taken the event so far (the first delivery's, or a wait's that started later). */
  consumedBy: string[];
  /** Steps this delivery un-parked: the caller sends their messages after the commit. */
  unparked: StepRef[];
  /** The STORED event's name, correlation hash and value (canonical JSON): a duplicate's may differ from what it sent. */
  stored: { name: string; matchHash: string; matchValue: string };
  /** An erasure blanked the stored event (a payload-free dedupe record): `stored` says nothing of its content. */
  erased: boolean;
}

/**
 * "This delivery's event": its id when this delivery inserted it, else nothing. Binds ?1 workspace,
 * ?2 key, ?3 nonce. `events.id` is AUTOINCREMENT (migration 0025): never an id an earlier,
 * deleted event had, so nothing recorded about another event can name this one.
 */
const MINE = "(SELECT id FROM events WHERE workspace = ?1 AND event_key = ?2 AND nonce = ?3)";

/**
 * The consumptions this delivery's batch inserted: of its own event (`MINE`), in its workspace, at
 * its `now` (?4). Only the batch that inserted the event gives it, so these are exactly its rows.
 */
const GIVEN_HERE = `(SELECT c.execution_id, c.vertex_id FROM event_consumptions c
                     WHERE c.workspace = ?1 AND c.event_rowid = ${MINE} AND c.consumed_at = ?4)`;

/** A wait whose step still waits on it: EXECUTING under the registration's retry base. Correlates `w`. */
const STILL_WAITING = (w: string) =>
  `EXISTS (SELECT 1 FROM steps s WHERE s.execution_id = ${w}.execution_id AND s.vertex_id = ${w}.vertex_id
             AND s.state = 'EXECUTING' AND s.retry_base = ${w}.retry_base)`;

/** Event `e` is one wait `w` waits for: its workspace, name and correlation value. */
const WAITS_FOR = (w: string, e: string) =>
  `${e}.workspace = ${w}.workspace AND ${e}.name = ${w}.name AND ${e}.match_hash = ${w}.match_hash`;

/** The wait has taken no event yet. Correlates `w`. */
const UNSERVED = (w: string) => `NOT EXISTS (SELECT 1 FROM event_consumptions c WHERE c.wait_key = ${w}.wait_key)`;

export async function deliverEvent(db: D1Database, e: NewEvent): Promise<DeliveredEvent> {
  const batch = new LabelledBatch<"retire" | "insert" | "give" | "consumed" | "unpark" | "outcome">(db);
  if (e.contentWindowMs !== null) {
    // ?1 workspace, ?2 key, ?3 now, ?4 window: an identical event outside the window is another event.
    batch.add(
      "retire",
      db
        .prepare(
          `UPDATE events SET event_key = event_key || '@' || received_at
           WHERE workspace = ?1 AND event_key = ?2 AND received_at <= ?3 - ?4`,
        )
        .bind(e.workspace, e.eventKey, e.now, e.contentWindowMs),
    );
  }
  batch
    .add(
      "insert",
      // ?1 workspace, ?2 key, ?3 nonce, ?4 id, ?5 name, ?6 match hash, ?7 match value, ?8 data, ?9 source, ?10 now, ?11 buffered until
      db
        .prepare(
          `INSERT INTO events (workspace, event_key, nonce, event_id, name, match_hash, match_value, data, source,
                               received_at, buffered_until)
           VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
           ON CONFLICT (workspace, event_key) DO UPDATE SET duplicates = duplicates + 1, last_duplicate_at = excluded.received_at`,
        )
        .bind(e.workspace, e.eventKey, e.nonce, e.eventId, e.name, e.matchHash, e.matchValue, e.data, e.source, e.now, e.bufferedUntil),
    )
    .add(
      "give",
      // ?1 workspace, ?2 key, ?3 nonce, ?4 now. Every `all` wait, and the oldest `one` wait, still waiting and unserved.
      db
        .prepare(
          `INSERT INTO event_consumptions (wait_key, event_rowid, workspace, execution_id, vertex_id, consumed_at)
           SELECT w.wait_key, e.id, e.workspace, w.execution_id, w.vertex_id, ?4
           FROM events e JOIN event_waits w ON w.workspace = e.workspace AND w.name = e.name AND w.match_hash = e.match_hash
           WHERE e.id = ${MINE} AND e.workspace = ?1 AND w.timed_out = 0 AND ${UNSERVED("w")} AND ${STILL_WAITING("w")}
             AND (w.consume = 'all' OR w.wait_key = (
               SELECT o.wait_key FROM event_waits o
               WHERE o.workspace = e.workspace AND o.name = e.name AND o.match_hash = e.match_hash AND o.consume = 'one'
                 AND o.timed_out = 0 AND ${UNSERVED("o")} AND ${STILL_WAITING("o")}
               ORDER BY o.registered_at, o.rowid LIMIT 1))`,
        )
        .bind(e.workspace, e.eventKey, e.nonce, e.now),
    )
    .add(
      "consumed",
      db
        .prepare(
          `UPDATE events SET consumed_at = ?4
           WHERE workspace = ?1 AND id = ${MINE} AND EXISTS ${GIVEN_HERE}`,
        )
        .bind(e.workspace, e.eventKey, e.nonce, e.now),
    )
    .add(
      "unpark",
      // A step still running its wait (between its claim and its park) is not parked: its park sees the consumption instead.
      // The un-park is a wake-up, not a lost lease: `parked_until` comes forward to now (it stays set), so the claim that
      // resumes the step records no `lease_expired` — exactly as for a DELAY woken by its timer (UNPARK_NOW).
      db
        .prepare(
          `UPDATE steps SET ${UNPARK_NOW("?4")}
           WHERE state = 'EXECUTING' AND parked_until IS NOT NULL AND (execution_id, vertex_id) IN ${GIVEN_HERE}
           RETURNING execution_id, vertex_id`,
        )
        .bind(e.workspace, e.eventKey, e.nonce, e.now),
    )
    .add(
      "outcome",
      db
        .prepare(
          `SELECT e.event_id, e.nonce, e.received_at, e.buffered_until, e.duplicates, e.name, e.match_hash, e.match_value, e.erased_at,
                  (SELECT json_group_array(c.execution_id) FROM event_consumptions c
                    WHERE c.event_rowid = e.id AND c.workspace = e.workspace AND c.consumed_at = e.received_at) AS resumed,
                  (SELECT json_group_array(c.execution_id) FROM event_consumptions c
                    WHERE c.event_rowid = e.id AND c.workspace = e.workspace) AS consumed_by
           FROM events e WHERE e.workspace = ?1 AND e.event_key = ?2`,
        )
        .bind(e.workspace, e.eventKey),
    );
  const results = await batch.run();
  const row = results.first<{
    event_id: string;
    nonce: string;
    received_at: number;
    buffered_until: number;
    duplicates: number;
    resumed: string;
    consumed_by: string;
    name: string;
    match_hash: string;
    match_value: string;
    erased_at: number | null;
  }>("outcome");
  if (!row) throw new Error(`event ${e.eventKey} of ${e.workspace} was not stored`);
  return {
    eventId: row.event_id,
    duplicate: row.nonce !== e.nonce,
    receivedAt: row.received_at,
    bufferedUntil: row.buffered_until,
    duplicates: row.duplicates,
    resumed: JSON.parse(row.resumed) as string[],
    consumedBy: JSON.parse(row.consumed_by) as string[],
    unparked: results
      .rows<{ execution_id: string; vertex_id: string }>("unpark")
      .map((r) => ({ executionId: r.execution_id, vertexId: r.vertex_id })),
    stored: { name: row.name, matchHash: row.match_hash, matchValue: row.match_value },
    erased: row.erased_at !== null,
  };
}

export interface WaitRegistration {
  /** `execution/vertex/retryBase`: one registration of the step's wait. */
  waitKey: string;
  retryBase: number;
  workspace: string;
  name: string;
  matchHash: string;
  matchValue: string;
  consume: "one" | "all";
  timeoutMs: number;
  now: number;
}

/** The event a wait took, as the step's output shows it. */
export interface TakenEvent {
  name: string;
  id: string;
  match: unknown;
  data: unknown;
  receivedAt: number;
  source: string | null;
}

export type WaitState =
  | { kind: "event"; event: TakenEvent }
  | { kind: "timed_out"; timeoutAt: number }
  | { kind: "waiting"; timeoutAt: number }
  /** The claim was lost before the batch (a takeover): nothing was written. */
  | { kind: "fenced_out" };

/**
 * Register (or keep) the wait, take a buffered event, or time out — one batch, fenced by the
 * claim. Binds ?1 execution, ?2 vertex, ?3 epoch (the fence), ?4 wait key, ?5 now.
 */
export async function registerWait(db: D1Database, fence: Fence, w: WaitRegistration): Promise<WaitState> {
  const fenced = `EXISTS (SELECT 1 FROM steps WHERE ${STEP_FENCE})`;
  const results = await new LabelledBatch<"register" | "foreign" | "take" | "consumed" | "time_out" | "state">(db)
    .add(
      "register",
      // ?6 retry base, ?7 workspace, ?8 name, ?9 match hash, ?10 match value, ?11 consume, ?12 timeout ms.
      // A new registration (an operator retry moved the retry base) replaces the old one; the same one is kept as it is.
      db
        .prepare(
          `INSERT INTO event_waits (execution_id, vertex_id, wait_key, retry_base, workspace, name, match_hash, match_value, consume,
                                    registered_at, timeout_at)
           SELECT ?1, ?2, ?4, ?6, ?7, ?8, ?9, ?10, ?11, ?5, ?5 + ?12 WHERE ${fenced}
           ON CONFLICT (execution_id, vertex_id) DO UPDATE SET
             wait_key = excluded.wait_key, retry_base = excluded.retry_base, workspace = excluded.workspace, name = excluded.name,
             match_hash = excluded.match_hash, match_value = excluded.match_value, consume = excluded.consume,
             registered_at = excluded.registered_at, timeout_at = excluded.timeout_at, timed_out = 0
           WHERE event_waits.wait_key <> excluded.wait_key`,
        )
        .bind(...fenceParams(fence), w.waitKey, w.now, w.retryBase, w.workspace, w.name, w.matchHash, w.matchValue, w.consume, w.timeoutMs),
    )
    .add(
      "foreign",
      // Defence in depth: a consumption under this wait key whose event is another workspace's, name or
      // value than this registration's was never this wait's (a key given again: issue 41, finding 1). It
      // goes, so the wait neither completes with it nor counts as served (and can still time out or take
      // its own event); the event it names keeps `consumed_at`. (No test of times here: the delivery's
      // clock and the claim's are two isolates' clocks.)
      db
        .prepare(
          `DELETE FROM event_consumptions
           WHERE wait_key = ?4 AND ${fenced} AND NOT EXISTS (
             SELECT 1 FROM event_waits w JOIN events e ON e.id = event_consumptions.event_rowid
             WHERE w.wait_key = ?4 AND w.execution_id = ?1 AND w.vertex_id = ?2 AND ${WAITS_FOR("w", "e")}
               AND event_consumptions.workspace = w.workspace AND event_consumptions.execution_id = ?1)`,
        )
        .bind(...fenceParams(fence), w.waitKey),
    )
    .add(
      "take",
      // The oldest buffered event that matches (unconsumed, its buffer window still open), for an unserved wait before its timeout.
      db
        .prepare(
          `INSERT INTO event_consumptions (wait_key, event_rowid, workspace, execution_id, vertex_id, consumed_at)
           SELECT w.wait_key, e.id, e.workspace, w.execution_id, w.vertex_id, ?5
           FROM event_waits w JOIN events e ON e.id = (
             SELECT b.id FROM events b
             WHERE b.workspace = w.workspace AND b.name = w.name AND b.match_hash = w.match_hash
               AND b.consumed_at IS NULL AND b.buffered_until > ?5
             ORDER BY b.received_at, b.id LIMIT 1)
           WHERE w.execution_id = ?1 AND w.vertex_id = ?2 AND w.wait_key = ?4 AND w.timed_out = 0 AND w.timeout_at > ?5
             AND ${UNSERVED("w")} AND ${fenced}`,
        )
        .bind(...fenceParams(fence), w.waitKey, w.now),
    )
    .add(
      "consumed",
      db
        .prepare(
          `UPDATE events SET consumed_at = ?5
           WHERE id = (SELECT event_rowid FROM event_consumptions WHERE wait_key = ?4) AND consumed_at IS NULL AND ${fenced}`,
        )
        .bind(...fenceParams(fence), w.waitKey, w.now),
    )
    .add(
      "time_out",
      db
        .prepare(
          `UPDATE event_waits SET timed_out = 1
           WHERE execution_id = ?1 AND vertex_id = ?2 AND wait_key = ?4 AND timeout_at <= ?5 AND ${UNSERVED("event_waits")} AND ${fenced}`,
        )
        .bind(...fenceParams(fence), w.waitKey, w.now),
    )
    .add(
      "state",
      db
        .prepare(
          `SELECT w.timeout_at, w.timed_out, e.event_id, e.name, e.match_value, e.data, e.received_at, e.source,
                  (SELECT 1 FROM steps WHERE ${STEP_FENCE}) AS ours
           FROM event_waits w
           LEFT JOIN event_consumptions c ON c.wait_key = w.wait_key
           LEFT JOIN events e ON e.id = c.event_rowid AND ${WAITS_FOR("w", "e")}
           WHERE w.execution_id = ?1 AND w.vertex_id = ?2 AND w.wait_key = ?4`,
        )
        .bind(...fenceParams(fence), w.waitKey),
    )
    .run();
  const row = results.first<{
    timeout_at: number;
    timed_out: number;
    event_id: string | null;
    name: string | null;
    match_value: string | null;
    data: string | null;
    received_at: number | null;
    source: string | null;
    ours: number | null;
  }>("state");
  if (!row || row.ours !== 1) return { kind: "fenced_out" };
  if (row.event_id !== null && row.name !== null && row.received_at !== null) {
    return {
      kind: "event",
      event: {
        name: row.name,
        id: row.event_id,
        match: JSON.parse(row.match_value ?? "null") as unknown,
        data: row.data === null ? null : (JSON.parse(row.data) as unknown),
        receivedAt: row.received_at,
        source: row.source,
      },
    };
  }
  if (row.timed_out === 1) return { kind: "timed_out", timeoutAt: row.timeout_at };
  return { kind: "waiting", timeoutAt: row.timeout_at };
}

/** A wait listed for a (name, correlation value): `GET /v1/waits`. */
export interface OpenWait {
  executionId: string;
  vertexId: string;
  workflowId: string;
  name: string;
  matchValue: unknown;
  consume: "one" | "all";
  registeredAt: number;
  timeoutAt: number;
}

/**
 * The open waits of a workspace on one event name (and its correlation values, when given: the
 * readings of one typed value), oldest first: registered, unserved, not timed out, their step still
 * waiting. Binds ?1 workspace, ?2 name, ?3 the match hashes (a JSON array, or NULL for any), ?4 limit.
 */
export async function listOpenWaits(
  db: D1Database,
  q: { workspace: string; name: string; matchHashes: readonly string[] | null; limit: number },
): Promise<OpenWait[]> {
  const { results } = await db
    .prepare(
      `SELECT w.execution_id, w.vertex_id, x.workflow_id, w.name, w.match_value, w.consume, w.registered_at, w.timeout_at
       FROM event_waits w JOIN executions x ON x.id = w.execution_id
       WHERE w.workspace = ?1 AND w.name = ?2 AND (?3 IS NULL OR w.match_hash IN (SELECT value FROM json_each(?3))) AND w.timed_out = 0
         AND ${UNSERVED("w")} AND ${STILL_WAITING("w")}
       ORDER BY w.registered_at, w.rowid LIMIT ?4`,
    )
    .bind(q.workspace, q.name, q.matchHashes === null ? null : JSON.stringify(q.matchHashes), q.limit)
    .all<{
      execution_id: string;
      vertex_id: string;
      workflow_id: string;
      name: string;
      match_value: string;
      consume: "one" | "all";
      registered_at: number;
      timeout_at: number;
    }>();
  return results.map((r) => ({
    executionId: r.execution_id,
    vertexId: r.vertex_id,
    workflowId: r.workflow_id,
    name: r.name,
    matchValue: JSON.parse(r.match_value) as unknown,
    consume: r.consume,
    registeredAt: r.registered_at,
    timeoutAt: r.timeout_at,
  }));
}

/**
 * `sumEvents`: the events a workspace received at or after `since` and the duplicate deliveries
 * they absorbed (GET /v1/stats). Per workspace, not per execution: a duplicate of an event no wait
 * took has no trace to count it in. Binds ?1 workspace, ?2 since; reads the workspace's range of
 * `events_match`.
 */
export async function sumEvents(db: D1Database, workspace: string, since: number): Promise<{ received: number; duplicates: number }> {
  const row = await db
    .prepare(
      `SELECT count(*) AS received, coalesce(sum(duplicates), 0) AS duplicates FROM events WHERE workspace = ?1 AND received_at >= ?2`,
    )
    .bind(workspace, since)
    .first<{ received: number; duplicates: number }>();
  return { received: row?.received ?? 0, duplicates: row?.duplicates ?? 0 };
}

/**
 * What an erasure does to the events its executions took (docs/waits.md "Erasure"). `ids`: a SQL
 * set of the erased execution ids; `workspaces`: a SQL set of their workspace; `now`: the time.
 * Two statements, in this order, in the caller's batch (its guard appended to each):
 * - `blank`: an event that only erased executions took keeps a payload-free dedupe record — its key,
 *   the sender's id, name, source and times stay (a provider's retry is still a duplicate and resumes
 *   nothing); its data and correlation value are blanked (`ERASED_MATCH_HASH` matches no wait) and
 *   `erased_at` set. It stays taken. An event another execution also took (a broadcast) is kept
 *   whole: it is that execution's event too, and it still resumes with it.
 * - `release`: the erased executions' consumptions go (what they took, and when).
 */
export const ERASED_MATCH_HASH = "0".repeat(64);

export function erasedEventsSql(ids: string, workspaces: string, now: string): { blank: string; release: string } {
  return {
    blank: `UPDATE events SET data = NULL, match_value = 'null', match_hash = '${ERASED_MATCH_HASH}', erased_at = ${now},
                              consumed_at = coalesce(consumed_at, ${now})
            WHERE workspace IN ${workspaces} AND erased_at IS NULL
              AND id IN (SELECT c.event_rowid FROM event_consumptions c WHERE c.execution_id IN ${ids} AND c.workspace IN ${workspaces})
              AND NOT EXISTS (SELECT 1 FROM event_consumptions o WHERE o.event_rowid = events.id AND o.execution_id NOT IN ${ids})`,
    release: `DELETE FROM event_consumptions WHERE execution_id IN ${ids} AND workspace IN ${workspaces}`,
  };
}

/**
 * `eraseTakenEvents`: for an execution the history sweep already removed (its consumptions stay
 * until the events sweep), what an erasure does to the events it took (`erasedEventsSql`). One batch.
 */
export async function eraseTakenEvents(db: D1Database, workspace: string, executionId: string, now: number): Promise<number> {
  const sql = erasedEventsSql("(?1)", "(?2)", "?3");
  const results = await new LabelledBatch<"blank" | "release">(db)
    .add("blank", db.prepare(sql.blank).bind(executionId, workspace, now))
    .add("release", db.prepare(sql.release).bind(executionId, workspace))
    .run();
  return results.changes("blank");
}
