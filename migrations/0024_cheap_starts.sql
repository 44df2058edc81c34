-- A start in three statements, a duplicate trigger in three statements and two rows (issue 31,
-- docs/ledger.md "The start batch"). The start batch is sent before the trigger knows whether it
-- won, so what a duplicate pays is the batch itself: it now holds the identity claim, the execution
-- (insert for the winner, the duplicate's count for everyone else) and every start step in ONE
-- insert. What the winner wrote in statements of its own is written by the triggers below, which
-- fire only on the winner's rows, so a duplicate never runs them.
--
-- Every trigger body is ONE statement with upper-case BEGIN/END and no inner END (no CASE): the
-- shape wrangler's statement splitter keeps whole on a remote apply (workers-sdk #4998, #14991,
-- #15178).

-- The identity rows, rebuilt WITHOUT ROWID: the identity is the key (a rowid table kept a second
-- b-tree for it, a row written more on every claim). The rows live for the dedupe window, so the
-- copy is bounded. Duplicates are no longer counted here (see `duplicate_log` below): the two
-- counter columns go. New: `value_hashes`, the identity's business values (their hashes,
-- src/ingress/identity-values.ts), which travel with the claim so the execution's insert indexes
-- them for the search without a statement of its own (trigger `executions_identity_values`).
CREATE TABLE execution_identities_new (
  identity              TEXT PRIMARY KEY CHECK (length(identity) = 64),
  workspace             TEXT NOT NULL,
  workflow_id           TEXT NOT NULL,
  execution_id          TEXT NOT NULL,
  claim_token           TEXT NOT NULL,
  window_start          INTEGER NOT NULL,
  expires_at            INTEGER NOT NULL,
  previous_execution_id TEXT,
  value_hashes          TEXT,
  CHECK (expires_at > window_start)
) WITHOUT ROWID;
INSERT INTO execution_identities_new
  (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at, previous_execution_id, value_hashes)
SELECT identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at, previous_execution_id, NULL
FROM execution_identities;
DROP TABLE execution_identities;
ALTER TABLE execution_identities_new RENAME TO execution_identities;
CREATE INDEX execution_identities_expiry ON execution_identities (expires_at);

-- A first step claimed at its insert (a chained first step) records the first send of its
-- destination key there too: where the key goes (the URL's origin, or `connector:<name>`) and
-- whether the key declares a retention. NULL for every other step.
ALTER TABLE steps ADD COLUMN key_destination TEXT;
ALTER TABLE steps ADD COLUMN key_guarded INTEGER;

-- The duplicates of a trigger, one by one, on the execution they joined (the first 100): a JSON
-- array of [seq, at, trigger_kind, identity_kind]. The counter and the log are written by the same
-- update of the same row, so a duplicate writes two rows — the execution's, and its entry in
-- `executions_with_duplicates`, whose WHERE reads the count — instead of five (the identity row and
-- its index, the execution's two, a duplicate_triggers row). Replaces the duplicate_triggers table.
ALTER TABLE executions ADD COLUMN duplicate_log TEXT;
UPDATE executions SET duplicate_log = (
  SELECT json_group_array(json_array(d.seq, d.at, d.trigger_kind, d.identity_kind))
  FROM (SELECT * FROM duplicate_triggers d WHERE d.execution_id = executions.id ORDER BY d.seq) d)
WHERE id IN (SELECT execution_id FROM duplicate_triggers);
DROP TABLE duplicate_triggers;

-- A step inserted claimed (EXECUTING, epoch 1) opens its attempt's row, as `openAttempt` does for a
-- claim (src/ledger/attempts.ts): numbered in the execution's change stream.
CREATE TRIGGER steps_claimed_at_insert AFTER INSERT ON steps WHEN NEW.state = 'EXECUTING' BEGIN INSERT INTO step_attempts (execution_id, vertex_id, epoch, attempt, outcome, started_at, idempotency_key, seq, ev_mark) VALUES (NEW.execution_id, NEW.vertex_id, NEW.epoch, NEW.attempt, 'running', NEW.updated_at, NEW.idempotency_key, (SELECT coalesce(max(sq.seq), 0) + 1 FROM step_attempts sq WHERE sq.execution_id = NEW.execution_id), (SELECT coalesce(max(mk.id), 0) FROM step_events mk WHERE mk.execution_id = NEW.execution_id)) ON CONFLICT (execution_id, vertex_id, epoch) DO NOTHING; END;

-- ... and the first send of its key, for the retention guard, as the key persist's `upsertKeySend`.
CREATE TRIGGER steps_key_sent_at_insert AFTER INSERT ON steps WHEN NEW.key_destination IS NOT NULL AND NEW.idempotency_key IS NOT NULL BEGIN INSERT INTO destination_key_sends (workspace, idempotency_key, destination, first_sent_at, counted_from, execution_id, vertex_id, guarded) VALUES (NEW.workspace, NEW.idempotency_key, NEW.key_destination, NEW.created_at, NEW.created_at, NEW.execution_id, NEW.vertex_id, coalesce(NEW.key_guarded, 0)) ON CONFLICT (workspace, idempotency_key, destination) DO UPDATE SET guarded = max(guarded, excluded.guarded); END;

-- The execution a trigger created indexes its identity's business values (migrations/0021), read
-- from the identity row that names it — the winner's claim, written earlier in the same batch.
CREATE TRIGGER executions_identity_values AFTER INSERT ON executions WHEN NEW.identity IS NOT NULL BEGIN INSERT INTO identity_values (workspace, value_hash, execution_id) SELECT NEW.workspace, v.value, NEW.id FROM execution_identities i CROSS JOIN json_each(i.value_hashes) v WHERE i.identity = NEW.identity AND i.execution_id = NEW.id AND i.value_hashes IS NOT NULL ON CONFLICT DO NOTHING; END;

-- A reuse after failure (an entry point's `reusePolicy: "after-failure"`) supersedes the FAILED
-- execution it follows, so that one is no longer retried or started over: was a statement of every
-- such start batch, duplicates included.
CREATE TRIGGER executions_supersede_failed AFTER INSERT ON executions WHEN NEW.previous_execution_id IS NOT NULL BEGIN UPDATE executions SET superseded_by = NEW.id, updated_at = NEW.created_at WHERE id = NEW.previous_execution_id AND status = 'FAILED' AND superseded_by IS NULL; END;

-- Nothing reads DISPATCHED steps by `available_at` alone: the reaper's re-send reads
-- `steps_first_resend_due` and `steps_next_resend_due` (src/ledger/step-recovery.ts), every other
-- statement a step by its key. The index cost a row written on every dispatch and every claim.
DROP INDEX steps_dispatched_due;

-- The change stream of attempts reads one execution's attempts (src/ledger/execution-changes.ts):
-- by the primary key's execution prefix, at most 20 per step, sorted. Its own index cost a row
-- written when an attempt opened and another when it ended — 4 of an execution's writes, each
-- billed at a thousand times a row read.
DROP INDEX step_attempts_changes;

-- The operator's count of executions (migrations/0017) was kept exact by two triggers: one hot row
-- written on every execution's insert and again on its removal — two of its rows written, a
-- dollar per million executions each. The storage task now recounts it at most hourly
-- (src/ledger/storage.ts `recountExecutions`: one `count(*)` of the table's smallest index, billed
-- as rows read at a thousandth of a write), and the figures say when it counted. The count as
-- of this migration stays; `executions_counted_at` 0 makes the first tick recount.
DROP TRIGGER executions_counted_in;
DROP TRIGGER executions_counted_out;
INSERT INTO history_counters (name, value) VALUES ('executions_counted_at', 0) ON CONFLICT (name) DO NOTHING;
