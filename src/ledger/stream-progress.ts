/**
 * A stream poll (src/ingress/watch.ts): an execution's status, every step's progress — and, once it
 * compensates, every undo step's (named by its row key `<vertex>#undo#<place>`, after the steps) —
 * and the change position (./execution-changes.ts), in one statement.
 */
import { stepsWithEntry } from "./entry-step";
import { latestAttemptMark, latestAttemptSeq } from "./attempts";
import type { ChangePosition } from "./execution-changes";
import { bounded, byteLength } from "./execution-records";
import type { ExecutionStatus } from "./execution-types";
import type { StepState } from "./step-sql";

/** A step as the stream compares it between polls (src/ingress/watch.ts). */
export interface StepProgressRecord {
  vertexId: string;
  state: StepState;
  attempt: number;
  epoch: number;
  /** Null when the caller already has it (see `readStreamProgress`), or over `TRACE_VALUE_MAX_BYTES`. */
  outputJson: string | null;
  outputBytes: number | null;
  error: string | null;
}

export interface StreamProgress {
  status: ExecutionStatus;
  steps: StepProgressRecord[];
  /**
   * The newest position of the execution's change order (src/ledger/execution-changes.ts) in the
   * same snapshot: `GET …/events` after it delivers exactly what was committed after this read.
   */
  position: ChangePosition;
}

interface StreamProgressRow extends Partial<StepProgressRecord> {
  status: ExecutionStatus;
  eventMark: number;
  attemptMark: number | null;
  attemptSeq: number | null;
}

/**
 * A stream poll: the status, every step's progress and the change position, in ONE statement.
 * `reported`: the (vertex, epoch) pairs whose final state the caller already holds — their output
 * and error are not read again (a settled step's output does not change at the same epoch). Null
 * when the execution is not in this workspace. Binds ?1 execution id, ?2 workspace, ?3 reported.
 */
export async function readStreamProgress(
  db: D1Database,
  workspace: string,
  executionId: string,
  reported: ReadonlyArray<readonly [string, number]>,
): Promise<StreamProgress | null> {
  const known = `EXISTS (SELECT 1 FROM json_each(?3) r
                         WHERE json_extract(r.value, '$[0]') = s.vertex_id AND json_extract(r.value, '$[1]') = s.epoch)`;

  const { results } = await db
    .prepare(
      `SELECT e.status AS status,
              (SELECT coalesce(max(ev.id), 0) FROM step_events ev WHERE ev.execution_id = e.id) AS eventMark,
              ${latestAttemptMark("e.id")} AS attemptMark,
              ${latestAttemptSeq("e.id")} AS attemptSeq,
              s.vertex_id AS vertexId, s.state AS state, s.attempt AS attempt, s.epoch AS epoch,
              CASE WHEN ${known} THEN NULL ELSE ${bounded("s.output")} END AS outputJson,
              ${byteLength("s.output")} AS outputBytes,
              CASE WHEN ${known} THEN NULL ELSE s.error END AS error
       FROM executions e LEFT JOIN (
         SELECT execution_id, workspace, vertex_id, state, attempt, epoch, output, error, 0 AS undo, created_at, created_seq AS seq
         FROM ${stepsWithEntry("(?1)")}
         UNION ALL
         SELECT execution_id, workspace, row_key, state, attempt, epoch, output, error, 1, item_index, 0
         FROM work_items WHERE execution_id = ?1 AND kind = 'undo'
       ) s ON s.execution_id = e.id AND s.workspace = e.workspace
       WHERE e.id = ?1 AND e.workspace = ?2
       ORDER BY s.undo, s.created_at, s.seq`,
    )
    .bind(executionId, workspace, JSON.stringify(reported))
    .all<StreamProgressRow>();
  const first = results[0];
  if (!first) return null;
  const events: ChangePosition = [first.eventMark, 0];
  const attempts: ChangePosition | null = first.attemptMark === null ? null : [first.attemptMark, first.attemptSeq ?? 0];
  const position = attempts && (attempts[0] > events[0] || (attempts[0] === events[0] && attempts[1] > events[1])) ? attempts : events;
  const steps = results
    .filter((r): r is StreamProgressRow & StepProgressRecord => r.vertexId !== null && r.vertexId !== undefined)
    .map(({ vertexId, state, attempt, epoch, outputJson, outputBytes, error }) => ({
      vertexId,
      state,
      attempt,
      epoch,
      outputJson,
      outputBytes,
      error,
    }));
  return { status: first.status, steps, position };
}
