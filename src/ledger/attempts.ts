/**
 * Every attempt of a step on record (migrations/0010): one row per (execution, vertex, epoch),
 * bounded per step and in size. The statements are private to the ledger: the step modules place
 * them in the batches that already run, so no path gains a round trip.
 *
 * An attempt has NO row while it runs — a step's (`steps`, since migrations/0040) and a MAP item's
 * or an undo step's (`work_items`, ./work-rows.ts ITEM_ROWS, since migrations/0041): the running
 * attempt is the EXECUTING, unparked row itself — its epoch, attempt, key and `claimed_at` (NULL for
 * a step inserted claimed: its `created_at`) — and `readAttemptsOfSet` shows it from there
 * (`RUNNING_UNRECORDED`). Its row is written once, complete:
 * - by the batch that ends the attempt (`settleAndDispatch`, `scheduleRetry`,
 *   `scheduleInProgressRecheck`, `parkStep`, `settleItem`, `settleUndo`): `finishAttempt`, an INSERT
 *   from the row under the fence, placed before the transition (which moves the row out of
 *   EXECUTING and so would make the fence fail);
 * - when the row leaves the attempt otherwise — cancelled, re-dispatched by the reaper, taken over
 *   by a claim under a new epoch — by the trigger `steps_attempt_unrecorded` (migrations/0040) or
 *   `work_items_attempt_unrecorded` (migrations/0041): `cancelled` or `lost`.
 * The claim batch (`claimAndLoad`, `claimItemAndLoad`, `claimUndoAndLoad`) runs `markLostAttempts`
 * (for a `running` row opened before those migrations) and `trimAttempts`.
 * ./trace-reads.ts reads them for the trace (`readAttemptsOfSet`).
 *
 * Parameters follow the ledger's convention: the step fence is ?1 execution id, ?2 vertex id,
 * ?3 epoch.
 */
import { selectList } from "./columns";
import { fenceParams, type Fence, type StepRef } from "./step-sql";
import { fenceOn, ITEM_ROWS, STEP_ROWS, type RowSource } from "./work-rows";
import { ITEMS_BEYOND_PAGE } from "./map-trace";

/**
 * Attempts kept per step: the newest 20 (older ones are deleted by the claim batch that adds the
 * 21st). Enough for a whole retry budget plus the crash allowance of the default policy (3 + 10)
 * with room for in-progress re-checks; the step row keeps the counters of everything.
 */
export const MAX_ATTEMPTS_KEPT = 20;

/** The most bytes of JSON an attempt keeps of its request summary, and of its response. */
export const MAX_ATTEMPT_SUMMARY_BYTES = 8192;

/** The most characters an attempt keeps of its error. */
export const MAX_ATTEMPT_ERROR_CHARS = 2000;

export type AttemptOutcome = "running" | "completed" | "failed" | "retried" | "in_progress" | "lost" | "cancelled" | "slept";

/** Why a retry waits as long as it does: the backoff, the destination's `Retry-After`, or its "in progress". */
export type RetryDelayReason = "backoff" | "retry-after" | "in-progress";

/** What an attempt got back from its destination (the step output's view: allowlisted headers, secrets scrubbed). */
export interface AttemptResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** How an attempt ended, as the batch that ends it records it. */
export interface AttemptEnd {
  outcome: "completed" | "failed" | "retried" | "in_progress" | "slept";
  /** The redacted request summary (JSON text), if the attempt made one. */
  request: string | null;
  response: AttemptResponse | null;
  error: string | null;
  delay: { ms: number; reason: RetryDelayReason } | null;
}

export interface AttemptRecord {
  vertexId: string;
  epoch: number;
  attempt: number;
  outcome: AttemptOutcome;
  startedAt: number;
  finishedAt: number | null;
  idempotencyKey: string | null;
  /** The redacted request summary (JSON text, at most `MAX_ATTEMPT_SUMMARY_BYTES`). */
  requestJson: string | null;
  responseStatus: number | null;
  /** `{ headers, body }` of the response (JSON text, bounded like the request). */
  responseJson: string | null;
  error: string | null;
  delayMs: number | null;
  delayReason: RetryDelayReason | null;
}

export const ATTEMPT_RECORD = selectList<AttemptRecord>({
  vertexId: "a.vertex_id",
  epoch: "a.epoch",
  attempt: "a.attempt",
  outcome: "a.outcome",
  startedAt: "a.started_at",
  finishedAt: "a.finished_at",
  idempotencyKey: "a.idempotency_key",
  requestJson: "a.request",
  responseStatus: "a.response_status",
  responseJson: "a.response",
  error: "a.error",
  delayMs: "a.delay_ms",
  delayReason: "a.delay_reason",
});

// ---------------------------------------------------------------------------------------------
// The change stream's place of a row (migrations/0014, ./execution-changes.ts): every statement
// that changes an attempt row sets both, in the same statement — no statement is added.

/**
 * The execution's newest attempt change number (0 without one) for the execution id `x` (an SQL
 * expression): over the attempt rows and the completed attempts held on step rows (migrations/0042)
 * — each a range of its table's primary key. Not the view `step_attempts`: SQLite materialises a
 * compound view whole when a correlated subquery reads it, so every reader that correlates reads
 * the two tables apart.
 */
export const latestAttemptSeq = (
  x: string,
) => `max(coalesce((SELECT max(lr.seq) FROM step_attempt_rows lr WHERE lr.execution_id = ${x}), 0),
  coalesce((SELECT max(ls.att_seq) FROM steps ls WHERE ls.execution_id = ${x}), 0))`;

/**
 * The step-event mark of the execution's newest attempt (NULL without one), as `latestAttemptSeq`.
 * Marks and numbers are both taken when an attempt is written, so the newest has the greatest of each.
 */
export const latestAttemptMark = (
  x: string,
) => `nullif(max(coalesce((SELECT max(lr.ev_mark) FROM step_attempt_rows lr WHERE lr.execution_id = ${x}), -1),
  coalesce((SELECT max(ls.att_mark) FROM steps ls WHERE ls.execution_id = ${x}), -1)), -1)`;

/**
 * The execution's next attempt change number. Correlated with the row being written, so an UPDATE
 * of several rows (a cancel) numbers each one apart: SQLite evaluates it per row and sees the rows
 * this statement already wrote.
 */
export const NEXT_ATTEMPT_SEQ = `(${latestAttemptSeq("step_attempt_rows.execution_id")} + 1)`;

/** The execution's newest step event id (0 without one): binds ?1 execution id. */
export const STEP_EVENT_MARK = `(SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = ?1)`;

// ---------------------------------------------------------------------------------------------
// The claim batch

/**
 * `markLostAttempts`: an attempt still open under an older epoch than the step's can never finish
 * (its fence cannot hold again): it was lost — its worker died, or stalled until another claim
 * took the step over. Runs after `claimStep`; true whatever the claim's result, so no condition
 * on it. Binds ?1 execution id, ?2 vertex id.
 */
export function markLostAttempts(db: D1Database, ref: StepRef, rows: RowSource = STEP_ROWS): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE step_attempt_rows SET outcome = 'lost', seq = ${NEXT_ATTEMPT_SEQ}, ev_mark = ${STEP_EVENT_MARK}
       WHERE execution_id = ?1 AND vertex_id = ?2 AND outcome = 'running'
         AND epoch < (SELECT s.epoch FROM ${rows.table} s WHERE s.execution_id = ?1 AND s.${rows.key} = ?2)`,
    )
    .bind(ref.executionId, ref.vertexId);
}

/**
 * `trimAttempts`: keep the newest `MAX_ATTEMPTS_KEPT` attempts of the step (a primary-key range;
 * nothing to do while there are fewer — the subquery is NULL), counting a running attempt that has
 * no row yet (`RUNNING_UNRECORDED`: its row is written when it ends), so stored and running together
 * stay within the bound. Binds ?1, ?2, ?3 = kept - 1.
 */
export function trimAttempts(db: D1Database, ref: StepRef, rows: RowSource = STEP_ROWS): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM step_attempt_rows
       WHERE execution_id = ?1 AND vertex_id = ?2
         AND epoch < (SELECT k.epoch FROM step_attempt_rows k WHERE k.execution_id = ?1 AND k.vertex_id = ?2
                      ORDER BY k.epoch DESC LIMIT 1
                      OFFSET ?3 - EXISTS (SELECT 1 FROM ${rows.table} s WHERE s.execution_id = ?1 AND s.${rows.key} = ?2
                                                                 AND ${RUNNING_UNRECORDED("s", rows)}))`,
    )
    .bind(ref.executionId, ref.vertexId, MAX_ATTEMPTS_KEPT - 1);
}

/**
 * A row (alias `s`) of a row source — a step, or a MAP item / undo step (`work_items`, by its row
 * key) — whose current attempt runs with no row on record (migrations/0040, 0041): it is EXECUTING,
 * not parked (a parked step's attempt ended `slept`, or a permit waiter's was given back), and its
 * epoch has no attempt row. Such an attempt is shown from the row.
 */
export const RUNNING_UNRECORDED = (s: string, rows: RowSource = STEP_ROWS) => `${s}.state = 'EXECUTING' AND ${s}.parked_until IS NULL
  AND NOT EXISTS (SELECT 1 FROM step_attempt_rows ru
                  WHERE ru.execution_id = ${s}.execution_id AND ru.vertex_id = ${s}.${rows.key} AND ru.epoch = ${s}.epoch)`;

// ---------------------------------------------------------------------------------------------
// During and at the end of the attempt (fenced)

/**
 * `finishAttempt`: how the attempt ended, fenced — a worker fenced out changes nothing here (its
 * attempt was recorded lost by the takeover or the re-dispatch that replaced it, and the newer
 * attempt has another epoch). Must come before the batch's transition of the step. Binds the fence,
 * ?4 now, ?5–?11 the record.
 *
 * The row is INSERTed here, once, from the step's or the work item's row under the fence
 * (migrations/0040, 0041) — its epoch, attempt, key, and its start (`claimed_at`, or `created_at`
 * for a step inserted claimed; never after its end) — numbered in the change stream as the close of
 * an open row was. ON CONFLICT it closes the `running` row of an attempt opened before those
 * migrations, keeping its start and key.
 */
export function finishAttempt(
  db: D1Database,
  fence: Fence,
  now: number,
  end: AttemptEnd,
  rows: RowSource = STEP_ROWS,
  only: "any" | "closing a running row" = "any",
): D1PreparedStatement {
  const response = end.response ? boundedJson({ headers: end.response.headers, body: end.response.body }) : null;
  const closingOnly =
    only === "any"
      ? ""
      : `AND EXISTS (SELECT 1 FROM step_attempt_rows r WHERE r.execution_id = ?1 AND r.vertex_id = ?2 AND r.epoch = ?3
                                                       AND r.outcome = 'running')`;
  const sql = `INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key,
                                          request, response_status, response, error, delay_ms, delay_reason, seq, ev_mark)
       SELECT execution_id, ${rows.key}, epoch, attempt, ?5, min(coalesce(claimed_at, created_at), ?4), ?4, idempotency_key,
              ?6, ?7, ?8, ?9, ?10, ?11,
              ${latestAttemptSeq("?1")} + 1, ${STEP_EVENT_MARK}
       FROM ${rows.table} WHERE ${fenceOn(rows)} ${closingOnly}
       ON CONFLICT (execution_id, vertex_id, epoch) DO UPDATE
         SET outcome = excluded.outcome, finished_at = max(step_attempt_rows.started_at, ?4),
             idempotency_key = coalesce(step_attempt_rows.idempotency_key, excluded.idempotency_key), request = excluded.request,
             response_status = excluded.response_status, response = excluded.response, error = excluded.error,
             delay_ms = excluded.delay_ms, delay_reason = excluded.delay_reason, seq = excluded.seq, ev_mark = excluded.ev_mark
         WHERE step_attempt_rows.outcome = 'running'`;
  return db
    .prepare(sql)
    .bind(
      ...fenceParams(fence),
      now,
      end.outcome,
      end.request === null ? null : boundedJsonText(end.request),
      response === null ? null : end.response!.status,
      response,
      end.error === null ? null : truncateChars(end.error, MAX_ATTEMPT_ERROR_CHARS),
      end.delay?.ms ?? null,
      end.delay?.reason ?? null,
    );
}

/**
 * The attempt that completes a step, written on the step row by the settle's own UPDATE
 * (migrations/0042) instead of as a row of its own: the SET list to append to that UPDATE, fenced
 * by it, binding ?1 execution id, ?2 vertex id, ?3 epoch and, from `first`, the three values of
 * `completedOnStepParams`. The step row already holds the attempt's epoch, number, key, claim and
 * finish; these add its change-stream place (numbered as `finishAttempt` numbers a row) and its
 * bounded summaries. The view `step_attempts` shows it as the attempt's row. Not when this epoch
 * already has a row: a `running` row opened before migrations/0040, which `finishAttempt`
 * (`only: "closing a running row"`) closed earlier in the same batch.
 */
export function completedOnStepSet(first: number, stepRequest: number): string {
  const mine = `NOT EXISTS (SELECT 1 FROM step_attempt_rows r WHERE r.execution_id = ?1 AND r.vertex_id = ?2 AND r.epoch = ?3)`;
  // The request summary is the step's own (`request`, set by the same UPDATE to ?stepRequest when
  // given) unless bounding changed it, or the attempt made none while the step keeps an earlier
  // attempt's: `ATTEMPT_REQUEST_ON_STEP` reads it back. SET expressions read the row before the UPDATE.
  const request = `CASE WHEN ?${stepRequest} IS NULL THEN iif(request IS NULL, NULL, '${NO_REQUEST}')
                        WHEN ?${first} = ?${stepRequest} THEN NULL ELSE ?${first} END`;
  return `att_seq = CASE WHEN ${mine} THEN ${latestAttemptSeq("?1")} + 1 END,
          att_mark = CASE WHEN ${mine} THEN ${STEP_EVENT_MARK} END,
          att_request = CASE WHEN ${mine} THEN ${request} END,
          att_response_status = CASE WHEN ${mine} THEN ?${first + 1} END,
          att_response = CASE WHEN ${mine} THEN ?${first + 2} END`;
}

/**
 * `att_request` when the completing attempt made no request but the step row keeps an earlier
 * attempt's (a request summary is a JSON object, never this text).
 */
const NO_REQUEST = "none";

/**
 * The request summary of the completed attempt a step row (alias `s`) holds: its own `request`
 * unless `att_request` says otherwise (`completedOnStepSet`) — no second copy of the same bytes.
 */
export const ATTEMPT_REQUEST_ON_STEP = (s: string) =>
  `CASE WHEN ${s}.att_request IS NULL THEN ${s}.request WHEN ${s}.att_request = '${NO_REQUEST}' THEN NULL ELSE ${s}.att_request END`;

/**
 * The values `completedOnStepSet` binds: the request summary, the response's status and
 * `{ headers, body }`, bounded as a row's. `inOutput`: the response's headers and body are the step
 * output's own (a Gateway's output is its answer: src/steps/gateway/classify.ts) — then, when bounding
 * leaves them whole, no copy is stored (`att_response` NULL beside its status) and
 * `ATTEMPT_RESPONSE_ON_STEP` reads them from the output.
 */
export function completedOnStepParams(
  request: string | null,
  response: AttemptResponse | null,
  inOutput = false,
): [string | null, number | null, string | null] {
  if (response === null) return [request === null ? null : boundedJsonText(request), null, null];
  const summary = { headers: response.headers, body: response.body };
  const bounded = boundedJson(summary);
  const whole = inOutput && bounded === JSON.stringify(summary);
  return [request === null ? null : boundedJsonText(request), response.status, whole ? null : bounded];
}

/**
 * The response summary of the completed attempt a step row (alias `s`) holds: `att_response`, or
 * when it is NULL beside a status, `{ headers, body }` of the step's output (`completedOnStepParams`).
 */
export const ATTEMPT_RESPONSE_ON_STEP = (s: string) =>
  `CASE WHEN ${s}.att_response IS NULL AND ${s}.att_response_status IS NOT NULL
        THEN json_object('headers', ${s}.output -> '$.headers', 'body', ${s}.output -> '$.body') ELSE ${s}.att_response END`;

// ---------------------------------------------------------------------------------------------
// The trace's read

/**
 * `readAttemptsOfSet`: the attempts of every execution `owned` names (a subquery of execution ids,
 * bound by `params`), each row with its `executionId`, per execution, per step oldest first — the
 * order the trace shows them in (src/ledger/trace-reads.ts `readTraceRecordsForSet`). A running
 * attempt, which has no row until it ends (`RUNNING_UNRECORDED`), is read from its step row or its
 * work item's (a MAP item of the first page, an undo step): `running`, started when it was
 * claimed, with the key it holds.
 */
export function readAttemptsOfSet(db: D1Database, owned: string, params: unknown[]): D1PreparedStatement {
  return db
    .prepare(
      `SELECT a.execution_id AS executionId, ${ATTEMPT_RECORD} FROM step_attempt_rows a
       WHERE a.execution_id IN ${owned} AND NOT ${ITEMS_BEYOND_PAGE("a.vertex_id")}
       UNION ALL
       SELECT c.execution_id, ${COMPLETED_ON_STEP("c")} FROM steps c
       WHERE c.execution_id IN ${owned} AND c.att_seq IS NOT NULL
       UNION ALL
       SELECT s.execution_id, ${RUNNING_FROM_ROW("s", STEP_ROWS)} FROM steps s
       WHERE s.execution_id IN ${owned} AND ${RUNNING_UNRECORDED("s")}
       UNION ALL
       SELECT w.execution_id, ${RUNNING_FROM_ROW("w", ITEM_ROWS)} FROM work_items w
       WHERE w.execution_id IN ${owned} AND ${RUNNING_UNRECORDED("w", ITEM_ROWS)} AND NOT ${ITEMS_BEYOND_PAGE("w.row_key")}
       ORDER BY 1, 2, 3`,
    )
    .bind(...params);
}

/**
 * The completed attempt a step row holds (migrations/0042), as `ATTEMPT_RECORD` reads a row — the
 * same columns as the view `step_attempts` gives it. For a step row (alias `s`) with `att_seq`.
 */
export const COMPLETED_ON_STEP = (s: string) => `${s}.vertex_id, ${s}.epoch, max(${s}.attempt, 1), 'completed',
  min(coalesce(${s}.claimed_at, ${s}.created_at), ${s}.finished_at), ${s}.finished_at, ${s}.idempotency_key,
  ${ATTEMPT_REQUEST_ON_STEP(s)}, ${s}.att_response_status, ${ATTEMPT_RESPONSE_ON_STEP(s)}, NULL, NULL, NULL`;

/** A running attempt with no row, as `ATTEMPT_RECORD` reads a row, from its step's or work item's row (alias `s`). */
export const RUNNING_FROM_ROW = (s: string, rows: RowSource) => `${s}.${rows.key}, ${s}.epoch, ${s}.attempt, 'running',
  coalesce(${s}.claimed_at, ${s}.created_at), NULL, ${s}.idempotency_key, NULL, NULL, NULL, NULL, NULL, NULL`;

// ---------------------------------------------------------------------------------------------
// Bounds (a value over them would make the CHECK refuse the whole batch that ends the attempt)

const utf8 = new TextEncoder();
const bytesOf = (text: string): number => utf8.encode(text).byteLength;

/** At most `max` UTF-16 units, never splitting a surrogate pair. */
export function truncateChars(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = /[\uD800-\uDBFF]/.test(text[max - 1]!) ? max - 1 : max;
  return text.slice(0, end);
}

/** The longest prefix of `text` whose UTF-8 is at most `maxBytes`. */
function prefixWithin(text: string, maxBytes: number): string {
  if (bytesOf(text) <= maxBytes) return text;
  let low = 0;
  let high = Math.min(text.length, maxBytes);
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (bytesOf(truncateChars(text, mid)) <= maxBytes) low = mid;
    else high = mid - 1;
  }
  return truncateChars(text, low);
}

/** Preview lengths tried, longest first, for a summary over the bound (JSON escaping can grow a preview). */
const PREVIEW_BYTES = [4096, 1024, 256, 0];

/**
 * A summary as JSON text of at most `MAX_ATTEMPT_SUMMARY_BYTES`. Over it, a `body` is replaced by
 * `{ truncated, bytes, preview }` (the start of its text); if the rest is still too large, the
 * whole summary is. Truncation happens after redaction, so a preview holds no secret either.
 */
export function boundedJson(value: unknown): string {
  const text = JSON.stringify(value ?? null);
  if (bytesOf(text) <= MAX_ATTEMPT_SUMMARY_BYTES) return text;
  const fits = (candidate: string) => bytesOf(candidate) <= MAX_ATTEMPT_SUMMARY_BYTES;
  if (value !== null && typeof value === "object" && !Array.isArray(value) && "body" in value) {
    const { body } = value as { body: unknown };
    const bodyText = typeof body === "string" ? body : JSON.stringify(body ?? null);
    for (const bytes of PREVIEW_BYTES) {
      const candidate = JSON.stringify({ ...value, body: truncated(bodyText, bytes) });
      if (fits(candidate)) return candidate;
    }
  }
  for (const bytes of PREVIEW_BYTES) {
    const candidate = JSON.stringify(truncated(text, bytes));
    if (fits(candidate)) return candidate;
  }
  return JSON.stringify({ truncated: true, bytes: bytesOf(text) });
}

const truncated = (text: string, previewBytes: number) => ({
  truncated: true,
  bytes: bytesOf(text),
  preview: prefixWithin(text, previewBytes),
});

/** `boundedJson` of a summary already serialised: parsed only when over the bound. */
function boundedJsonText(text: string): string {
  if (bytesOf(text) <= MAX_ATTEMPT_SUMMARY_BYTES) return text;
  try {
    return boundedJson(JSON.parse(text) as unknown);
  } catch {
    return boundedJson(text);
  }
}
