/**
 * The change stream of an execution (GET /v1/executions/{id}/events, docs/events.md): its step
 * events and its attempt row changes in one order, read after a position, in ONE round trip.
 *
 * The order (migrations/0014): a step event sits at (id, 0), an attempt row at (ev_mark, seq) —
 * the step event high-water mark and the change number its last write recorded. Writes to D1 are
 * serialised, so this is the commit order: a position means the same on every connection, and
 * "after a position" is exactly the changes committed after it. An attempt row rewritten (opened,
 * then finished) moves to the place of its latest change: a reader after the open and before the
 * finish gets it once, finished.
 */
import { LabelledBatch } from "./batch";
import type { AttemptRecord } from "./attempts";
import type { ExecutionStatus } from "./execution-types";
import type { StepEventType } from "./step-events";

/** A place in the execution's change order: `[major, minor]` (see above). `[0, 0]` is before everything. */
export type ChangePosition = readonly [number, number];

/** A position as an event id (`<major>.<minor>`): what `Last-Event-ID` sends back to resume after it. */
export const eventId = (p: ChangePosition): string => `${p[0]}.${p[1]}`;

/** What an attempt change carries of the attempt's record (./attempts.ts). */
type AttemptChangeFields = Pick<
  AttemptRecord,
  "vertexId" | "epoch" | "attempt" | "outcome" | "startedAt" | "finishedAt" | "idempotencyKey" | "error" | "delayMs"
>;

export type ExecutionChange =
  | ({ kind: "attempt"; position: ChangePosition } & AttemptChangeFields)
  | { kind: "step.event"; position: ChangePosition; id: number; vertexId: string; type: StepEventType; epoch: number | null; at: number };

export interface ExecutionChanges {
  /** The execution's status as of this read; null when it is not in the workspace. */
  status: ExecutionStatus | null;
  /** The changes after the position, in order (at most `limit` of each kind). */
  changes: ExecutionChange[];
  /** More changes were pending than this read returned: read again from the last one. */
  more: boolean;
}

const compare = (a: ChangePosition, b: ChangePosition): number => a[0] - b[0] || a[1] - b[1];

/** An attempt change as read: the change's fields, and its position's two parts. */
type AttemptRow = Omit<Extract<ExecutionChange, { kind: "attempt" }>, "kind" | "position"> & { mark: number; seq: number };

interface EventRow {
  id: number;
  vertexId: string;
  type: StepEventType;
  epoch: number | null;
  at: number;
}

/**
 * `readExecutionChanges`: the status and up to `limit` step events and `limit` attempt changes
 * after `after`, as one batch of three statements (one round trip, one snapshot). Binds ?1
 * execution id, ?2 workspace, ?3 major, ?4 minor, ?5 limit. The changes of another workspace's
 * execution are never read (each statement checks the workspace).
 */
export async function readExecutionChanges(
  db: D1Database,
  workspace: string,
  executionId: string,
  after: ChangePosition,
  limit: number,
): Promise<ExecutionChanges> {
  const mine = `EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2)`;
  const params = [executionId, workspace, after[0], after[1], limit] as const;
  const results = await new LabelledBatch<"status" | "events" | "attempts">(db)
    .add("status", db.prepare(`SELECT status FROM executions WHERE id = ?1 AND workspace = ?2`).bind(executionId, workspace))
    .add(
      "events",
      db
        .prepare(
          `SELECT id, vertex_id AS vertexId, type, epoch, at FROM step_events
           WHERE execution_id = ?1 AND id > ?3 AND ${mine} AND ?4 >= 0
           ORDER BY id LIMIT ?5`,
        )
        .bind(...params),
    )
    .add(
      "attempts",
      db
        .prepare(
          // The attempt rows and the completed attempts held on step rows (migrations/0042), read apart.
          `SELECT vertex_id AS vertexId, epoch, attempt, outcome, started_at AS startedAt, finished_at AS finishedAt,
                  idempotency_key AS idempotencyKey, error, delay_ms AS delayMs, ev_mark AS mark, seq
           FROM step_attempt_rows
           WHERE execution_id = ?1 AND (ev_mark, seq) > (?3, ?4) AND ${mine}
           UNION ALL
           SELECT vertex_id, epoch, max(attempt, 1), 'completed', min(coalesce(claimed_at, created_at), finished_at), finished_at,
                  idempotency_key, NULL, NULL, att_mark, att_seq
           FROM steps
           WHERE execution_id = ?1 AND att_seq IS NOT NULL AND (att_mark, att_seq) > (?3, ?4) AND ${mine}
           ORDER BY mark, seq LIMIT ?5`,
        )
        .bind(...params),
    )
    .run();
  const status = results.first<{ status: ExecutionStatus }>("status")?.status ?? null;
  const events = results.rows<EventRow>("events");
  const attempts = results.rows<AttemptRow>("attempts");
  return { status, ...mergeChanges(events, attempts, limit) };
}

/**
 * The two reads merged in order. A read that came back full may have more behind its last row:
 * nothing past that row is delivered yet (an unread row of that kind could come before it).
 */
function mergeChanges(events: EventRow[], attempts: AttemptRow[], limit: number): { changes: ExecutionChange[]; more: boolean } {
  const changes: ExecutionChange[] = [
    ...events.map((e): ExecutionChange => ({ kind: "step.event", position: [e.id, 0], ...e })),
    ...attempts.map(({ mark, seq, ...a }): ExecutionChange => ({ kind: "attempt", position: [mark, seq], ...a })),
  ].sort((a, b) => compare(a.position, b.position));
  const cuts: ChangePosition[] = [];
  if (events.length >= limit) cuts.push([events.at(-1)!.id, 0]);
  if (attempts.length >= limit) cuts.push([attempts.at(-1)!.mark, attempts.at(-1)!.seq]);
  if (cuts.length === 0) return { changes, more: false };
  const cut = cuts.sort(compare)[0]!;
  return { changes: changes.filter((c) => compare(c.position, cut) <= 0), more: true };
}
