/**
 * What a set of executions' traces may weigh, estimated in SQL before they are read (the archive
 * refuses a trace too large to hold, and reads a set in bounded parts: src/history/archive.ts).
 */
import { byteLength, TRACE_VALUE_MAX_BYTES } from "./execution-records";
import { ATTEMPT_REQUEST_ON_STEP, ATTEMPT_RESPONSE_ON_STEP } from "./attempts";
import { OWNED_IDS, refsParam, TRACE_WAIT_EVENTS_MAX, type ExecutionRef } from "./trace-reads";

/**
 * What one execution's trace may weigh when read, estimated in SQL without reading the values
 * back: the bytes of the stored values the trace shows (each step's request and output as
 * bounded by `TRACE_VALUE_MAX_BYTES`, its error, every attempt's request, response and error,
 * every event's detail, each undo step's request, output and error as a step's) plus a fixed
 * allowance per row for the members around them (per registered wait, room for the events it
 * lists). An estimate, not the JSON's exact size (escaping, the summary's own members): the
 * archive uses it to refuse a trace too large to hold in memory before reading it, and to read a
 * set in bounded parts.
 */
export const TRACE_ROW_ALLOWANCE = {
  execution: 1_500,
  step: 700,
  attempt: 450,
  event: 150,
  duplicate: 120,
  /** A registered wait: its `wait` member and the most events it lists (`TRACE_WAIT_EVENTS_MAX`), counted as if all were there. */
  wait: 300 + TRACE_WAIT_EVENTS_MAX * 200,
} as const;

const boundedBytes = (column: string) =>
  `CASE WHEN ${byteLength(column)} <= ${TRACE_VALUE_MAX_BYTES} THEN ${byteLength(column)} ELSE 0 END`;

/**
 * `readTraceSizes`: the estimated bytes of each execution's trace (`TRACE_ROW_ALLOWANCE`), for a
 * set of executions, in ONE statement over the same bound JSON array. Absent: not in its ref's
 * workspace, or gone.
 */
export async function readTraceSizes(db: D1Database, refs: readonly ExecutionRef[]): Promise<Map<string, number>> {
  if (refs.length === 0) return new Map();
  const a = TRACE_ROW_ALLOWANCE;
  // The steps' rows, and the entry of an execution started since migrations/0045, which has none: its output is the payload.
  const { results } = await db
    .prepare(
      `SELECT e.id AS id, ${a.execution}
         + (SELECT coalesce(sum(${boundedBytes("s.request")} + ${boundedBytes("s.output")}
                                + coalesce(${byteLength("s.error")}, 0) + ${a.step}
                                + iif(s.att_seq IS NULL, 0, coalesce(${byteLength(`(${ATTEMPT_REQUEST_ON_STEP("s")})`)}, 0)
                                      + coalesce(${byteLength(`(${ATTEMPT_RESPONSE_ON_STEP("s")})`)}, 0) + ${a.attempt})), 0)
            FROM steps s WHERE s.execution_id = e.id)
         + iif(e.entry_next IS NULL, 0, ${boundedBytes("e.payload")} + ${a.step})
         + (SELECT coalesce(sum(coalesce(${byteLength("t.request")}, 0) + coalesce(${byteLength("t.response")}, 0)
                                + coalesce(${byteLength("t.error")}, 0) + ${a.attempt}), 0)
            FROM step_attempt_rows t WHERE t.execution_id = e.id)
         + (SELECT coalesce(sum(coalesce(${byteLength("ev.detail")}, 0) + ${a.event}), 0)
            FROM step_events ev WHERE ev.execution_id = e.id)
         + coalesce(json_array_length(e.duplicate_log), 0) * ${a.duplicate}
         + (SELECT count(*) * ${a.wait} FROM event_waits w WHERE w.execution_id = e.id)
         + (SELECT coalesce(sum(${boundedBytes("u.request")} + ${boundedBytes("u.output")}
                                + coalesce(${byteLength("u.error")}, 0) + ${a.step}), 0)
            FROM work_items u WHERE u.execution_id = e.id AND u.kind = 'undo') AS bytes
       FROM executions e WHERE e.id IN ${OWNED_IDS}`,
    )
    .bind(refsParam(refs))
    .all<{ id: string; bytes: number }>();
  return new Map(results.map((r) => [r.id, r.bytes]));
}
