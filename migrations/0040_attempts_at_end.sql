-- A step's attempt row written once, when the attempt ends (issue 47 point 2, docs/ledger.md "Rows
-- written per execution"; docs/steps.md "Every attempt on record"). No table rebuild: one column
-- added, two triggers dropped, one created.
--
-- Before, every attempt of a step was written twice: INSERTed as `running` at its claim (the claim
-- batch's `openAttempt`, or the trigger `steps_claimed_at_insert` for a step inserted claimed) and
-- UPDATEd when it ended (`finishAttempt`) — and a first attempt's key persist updated it a third
-- time. D1 bills every row an INSERT or UPDATE writes: two rows per attempt where one does. Now no
-- attempt row exists while a step's attempt runs: the running attempt is the EXECUTING, unparked
-- step row itself (its epoch, attempt, key, and when it was claimed), and the trace shows it from
-- there (src/ledger/attempts.ts `readAttemptsOfSet`). The row is written ONCE, complete, by the
-- batch that ends the attempt (`finishAttempt`: an INSERT from the step row under the fence; ON
-- CONFLICT it closes a `running` row opened before this migration). MAP items and undo steps
-- (`work_items`) keep their open-then-close rows.
--
-- 1. `steps.claimed_at`: when the claim of the current epoch was made (`claimStep` sets it in the
--    claim's own UPDATE; ADD COLUMN writes no row). NULL for a step inserted claimed (the chained
--    first step, a chained successor): it was claimed when it was created (`created_at`), and for
--    rows claimed before this migration (their attempt row holds the start).
-- 2. `steps_claimed_at_insert` dropped: a step inserted claimed opens no row.
-- 3. `steps_attempt_unrecorded` replaces `steps_parked_cancelled_attempt` (migrations/0034, made
--    again by 0038): when a step leaves its epoch's running attempt without the batch that ends an
--    attempt — it stops being EXECUTING, or a claim takes it over under a new epoch — and that
--    attempt is not on record, it is written then: `cancelled` (finished now) when the step was
--    cancelled (an operator's cancel, compensation's cancel of a wait between its claim and its
--    park), else `lost` (the reaper's re-dispatch of an expired lease, a takeover claim). A parked
--    step was not running an attempt (a DELAY's ended `slept`; a permit waiter's was given back).
--    A settle, retry or re-check wrote its row first in its batch, so this writes nothing for it.
--    Created last of the `UPDATE OF state` triggers of `steps`, so it fires after
--    `steps_parked_cancelled_event`: the attempt's change follows the `cancelled` event in the
--    change stream (its `ev_mark`), as before. A `running` row from before this migration is closed
--    by the same statement (ON CONFLICT).
ALTER TABLE steps ADD COLUMN claimed_at INTEGER;

DROP TRIGGER steps_claimed_at_insert;
DROP TRIGGER steps_parked_cancelled_attempt;

CREATE TRIGGER steps_attempt_unrecorded AFTER UPDATE OF state ON steps WHEN OLD.state = 'EXECUTING' AND OLD.parked_until IS NULL AND (NEW.state <> 'EXECUTING' OR NEW.epoch <> OLD.epoch) BEGIN INSERT INTO step_attempts (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key, seq, ev_mark) SELECT OLD.execution_id, OLD.vertex_id, OLD.epoch, max(OLD.attempt, 1), iif(NEW.state = 'CANCELLED', 'cancelled', 'lost'), coalesce(OLD.claimed_at, OLD.created_at), iif(NEW.state = 'CANCELLED', max(coalesce(OLD.claimed_at, OLD.created_at), NEW.finished_at), NULL), OLD.idempotency_key, (SELECT coalesce(max(sq.seq), 0) + 1 FROM step_attempts sq WHERE sq.execution_id = OLD.execution_id), (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = OLD.execution_id) WHERE NOT EXISTS (SELECT 1 FROM step_attempts x WHERE x.execution_id = OLD.execution_id AND x.vertex_id = OLD.vertex_id AND x.epoch = OLD.epoch AND x.outcome <> 'running') ON CONFLICT (execution_id, vertex_id, epoch) DO UPDATE SET outcome = excluded.outcome, finished_at = iif(excluded.finished_at IS NULL, NULL, max(step_attempts.started_at, excluded.finished_at)), idempotency_key = coalesce(step_attempts.idempotency_key, excluded.idempotency_key), seq = excluded.seq, ev_mark = excluded.ev_mark WHERE step_attempts.outcome = 'running'; END;
