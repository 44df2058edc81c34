/**
 * The model's invariants of attempts on record (docs/steps.md "Every attempt on record";
 * migrations/0040: a step's attempt row is written once, when the attempt ends):
 * - **no step attempt is stored running**: a step's running attempt has no row — it is the
 *   EXECUTING, unparked step row, and the trace reads it from there (src/ledger/attempts.ts
 *   `RUNNING_UNRECORDED`). A `running` row under a vertex id would be an attempt written twice.
 * - **every claim of a step is on record**: its stored attempts and its running one, if any, are
 *   as many as the claims it counts (`steps.attempt`), up to the newest `MAX_ATTEMPTS_KEPT`. A
 *   claim whose attempt ended without its own batch (a lease lost to the reaper or a takeover, a
 *   cancel) is recorded by the trigger `steps_attempt_unrecorded`.
 * No operation of its own: every other operation exercises them.
 */
import { MAX_ATTEMPTS_KEPT, RUNNING_UNRECORDED } from "../../src/ledger/attempts";
import { Violation, type World } from "./world";

export async function checkAttempts(world: World, shard: number): Promise<void> {
  const db = world.shardEnv(shard).DB;
  const running = await db
    .prepare(
      `SELECT a.execution_id, a.vertex_id, a.epoch FROM step_attempts a
       JOIN steps s ON s.execution_id = a.execution_id AND s.vertex_id = a.vertex_id
       WHERE a.outcome = 'running' LIMIT 1`,
    )
    .first<{ execution_id: string; vertex_id: string; epoch: number }>();
  if (running) {
    throw new Violation(
      "no step attempt is stored running",
      `${running.execution_id}/${running.vertex_id} epoch ${running.epoch} has a running row: the attempt is written at its end`,
    );
  }
  const missing = await db
    .prepare(
      `SELECT * FROM (
         SELECT s.execution_id, s.vertex_id, s.state, s.attempt,
                (SELECT count(*) FROM step_attempts a WHERE a.execution_id = s.execution_id AND a.vertex_id = s.vertex_id)
                  + (${RUNNING_UNRECORDED("s")}) AS shown
         FROM steps s)
       WHERE shown <> min(attempt, ?1) LIMIT 1`,
    )
    .bind(MAX_ATTEMPTS_KEPT)
    .first<{ execution_id: string; vertex_id: string; state: string; attempt: number; shown: number }>();
  if (missing) {
    throw new Violation(
      "every claim of a step is on record",
      `${missing.execution_id}/${missing.vertex_id} (${missing.state}) counts ${missing.attempt} attempt(s), ${missing.shown} on record`,
    );
  }
}
