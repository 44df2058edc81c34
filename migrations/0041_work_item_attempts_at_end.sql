-- A MAP item's and an undo step's attempt row written once, when the attempt ends (issue 47 point
-- 2, docs/ledger.md "Rows written per execution", the paragraph "A MAP item"; docs/steps.md "Every
-- attempt on record"): what migrations/0040 did for `steps`, now for `work_items`. No table
-- rebuild: one column added, one trigger created.
--
-- Before, every attempt of a work item was written twice or three times: INSERTed as `running` at
-- its claim (the claim batch's `openAttempt`, or the chained start's in an item settle batch), its
-- key recorded on it by the first key persist (`recordAttemptKey`), and UPDATEd when it ended
-- (`finishAttempt`). Now no attempt row exists while the item's attempt runs: the running attempt
-- is the EXECUTING, unparked `work_items` row itself (its epoch, attempt, key, and when it was
-- claimed), and the trace shows it from there (src/ledger/attempts.ts `readAttemptsOfSet`). The row
-- is written ONCE, complete, by the batch that ends the attempt (`finishAttempt`: an INSERT from the
-- item row under the fence; ON CONFLICT it closes a `running` row opened before this migration).
--
-- 1. `work_items.claimed_at`: when the claim of the current epoch was made (`claimStep` sets it in
--    the claim's own UPDATE, an item settle's chained start in its own; ADD COLUMN writes no row).
--    NULL for rows claimed before this migration (their attempt row holds the start).
-- 2. `work_items_attempt_unrecorded`, `steps_attempt_unrecorded`'s twin: when an item leaves its
--    epoch's running attempt without the batch that ends an attempt — it stops being EXECUTING, or
--    a claim takes it over under a new epoch — and that attempt is not on record, it is written
--    then: `cancelled` (finished now) when the item was cancelled (an operator's cancel), else
--    `lost` (the reaper's re-dispatch of an expired lease, a takeover claim). A parked item was not
--    running an attempt (a permit waiter's was given back). A settle, retry or re-check wrote its
--    row first in its batch, so this writes nothing for it. A `running` row from before this
--    migration is closed by the same statement (ON CONFLICT), keeping its start and key.
ALTER TABLE work_items ADD COLUMN claimed_at INTEGER;

CREATE TRIGGER work_items_attempt_unrecorded AFTER UPDATE OF state ON work_items WHEN OLD.state = 'EXECUTING' AND OLD.parked_until IS NULL AND (NEW.state <> 'EXECUTING' OR NEW.epoch <> OLD.epoch) BEGIN INSERT INTO step_attempts (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key, seq, ev_mark) SELECT OLD.execution_id, OLD.row_key, OLD.epoch, max(OLD.attempt, 1), iif(NEW.state = 'CANCELLED', 'cancelled', 'lost'), coalesce(OLD.claimed_at, OLD.created_at), iif(NEW.state = 'CANCELLED', max(coalesce(OLD.claimed_at, OLD.created_at), NEW.finished_at), NULL), OLD.idempotency_key, (SELECT coalesce(max(sq.seq), 0) + 1 FROM step_attempts sq WHERE sq.execution_id = OLD.execution_id), (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = OLD.execution_id) WHERE NOT EXISTS (SELECT 1 FROM step_attempts x WHERE x.execution_id = OLD.execution_id AND x.vertex_id = OLD.row_key AND x.epoch = OLD.epoch AND x.outcome <> 'running') ON CONFLICT (execution_id, vertex_id, epoch) DO UPDATE SET outcome = excluded.outcome, finished_at = iif(excluded.finished_at IS NULL, NULL, max(step_attempts.started_at, excluded.finished_at)), idempotency_key = coalesce(step_attempts.idempotency_key, excluded.idempotency_key), seq = excluded.seq, ev_mark = excluded.ev_mark WHERE step_attempts.outcome = 'running'; END;
