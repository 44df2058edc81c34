/**
 * The model's invariants of attempts on record (docs/steps.md "Every attempt on record";
 * migrations/0040 and 0041: an attempt's row is written once, when the attempt ends — a step's,
 * and a MAP item's or an undo step's, `work_items`):
 * - **no attempt is stored running**: a running attempt has no row — it is the EXECUTING,
 *   unparked step or work item row, and the trace reads it from there (src/ledger/attempts.ts
 *   `RUNNING_UNRECORDED`). A `running` row under a vertex id or a row key would be an attempt
 *   written twice.
 * - **every claim is on record**: a step's or a work item's stored attempts and its running one,
 *   if any, are as many as the claims it counts (`attempt`), up to the newest `MAX_ATTEMPTS_KEPT`.
 *   A claim whose attempt ended without its own batch (a lease lost to the reaper or a takeover, a
 *   cancel) is recorded by the trigger `steps_attempt_unrecorded` (`work_items_attempt_unrecorded`).
 * - **a completed attempt on its step row, once** (migrations/0042): a step row holds an attempt
 *   (`att_seq`) only when it is COMPLETED, and never beside an attempt row of the same epoch.
 * - **one change number per attempt**: every attempt of an execution, row or step row, a step's or
 *   a work item's, has its own `seq` (the change stream's order: src/ledger/attempts.ts
 *   `latestAttemptSeq` numbers across both tables).
 * No operation of its own: every other operation exercises them.
 */
import { MAX_ATTEMPTS_KEPT, RUNNING_UNRECORDED } from "../../src/ledger/attempts";
import { ITEM_ROWS, STEP_ROWS, type RowSource } from "../../src/ledger/work-rows";
import { Violation, type World } from "./world";

const SOURCES: ReadonlyArray<{ rows: RowSource; what: string }> = [
  { rows: STEP_ROWS, what: "step" },
  { rows: ITEM_ROWS, what: "work item" },
];

export async function checkAttempts(world: World, shard: number): Promise<void> {
  const db = world.shardEnv(shard).DB;
  for (const { rows, what } of SOURCES) {
    const running = await db
      .prepare(
        `SELECT a.execution_id, a.vertex_id, a.epoch FROM step_attempts a
         JOIN ${rows.table} s ON s.execution_id = a.execution_id AND s.${rows.key} = a.vertex_id
         WHERE a.outcome = 'running' LIMIT 1`,
      )
      .first<{ execution_id: string; vertex_id: string; epoch: number }>();
    if (running) {
      throw new Violation(
        "no attempt is stored running",
        `${what} ${running.execution_id}/${running.vertex_id} epoch ${running.epoch} has a running row: the attempt is written at its end`,
      );
    }
    const missing = await db
      .prepare(
        `SELECT * FROM (
           SELECT s.execution_id, s.${rows.key} AS vertex_id, s.state, s.attempt,
                  (SELECT count(*) FROM step_attempts a WHERE a.execution_id = s.execution_id AND a.vertex_id = s.${rows.key})
                    + (${RUNNING_UNRECORDED("s", rows)}) AS shown
           FROM ${rows.table} s)
         WHERE shown <> min(attempt, ?1) LIMIT 1`,
      )
      .bind(MAX_ATTEMPTS_KEPT)
      .first<{ execution_id: string; vertex_id: string; state: string; attempt: number; shown: number }>();
    if (missing) {
      throw new Violation(
        "every claim is on record",
        `${what} ${missing.execution_id}/${missing.vertex_id} (${missing.state}) counts ${missing.attempt} attempt(s), ` +
          `${missing.shown} on record`,
      );
    }
  }
  const onStep = await db
    .prepare(
      `SELECT s.execution_id, s.vertex_id, s.state, s.epoch FROM steps s
       WHERE s.att_seq IS NOT NULL
         AND (s.state <> 'COMPLETED' OR EXISTS (SELECT 1 FROM step_attempt_rows r
                                                WHERE r.execution_id = s.execution_id AND r.vertex_id = s.vertex_id AND r.epoch = s.epoch))
       LIMIT 1`,
    )
    .first<{ execution_id: string; vertex_id: string; state: string; epoch: number }>();
  if (onStep) {
    throw new Violation(
      "a completed attempt on its step row, once",
      `step ${onStep.execution_id}/${onStep.vertex_id} (${onStep.state}) holds an attempt of epoch ${onStep.epoch} ` +
        "that is not its completion, or that also has a row",
    );
  }
  const twice = await db
    .prepare(
      `SELECT execution_id, seq, count(*) AS n FROM step_attempts WHERE seq IS NOT NULL
       GROUP BY execution_id, seq HAVING count(*) > 1 LIMIT 1`,
    )
    .first<{ execution_id: string; seq: number; n: number }>();
  if (twice) {
    throw new Violation(
      "one change number per attempt",
      `execution ${twice.execution_id} has ${twice.n} attempts numbered ${twice.seq} in its change stream`,
    );
  }
}
