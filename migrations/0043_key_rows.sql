-- Two rows fewer per keyed execution (issue 47 point 2, docs/ledger.md "Rows written per execution"),
-- both in the key's send. No table rebuild: three ADD COLUMNs, two indexes recreated, one trigger
-- replaced (same name), two triggers created.
--
-- 1. `steps_by_key` (and `work_items_by_key`) only where the send row does not already name the
--    step (the item). The key's first send (`destination_key_sends`) names the step that sent it
--    (execution_id, vertex_id — a MAP item's or undo step's row key), and the key search reads it by
--    its primary key (src/ledger/search.ts), so the first execution to send a key needs no index
--    entry to be found by it.
--    `key_first_send` = 1: the send row of this row's key and destination was written by this row
--    (it names it). Decided in the statement that writes the key — the start batch's insert of a
--    chained first step (before its trigger writes the send), or the first attempt's key persist
--    (before the send's upsert, same batch): "no send row for this key and destination yet" — race
--    free, as D1 runs one statement and one batch at a time. NULL: every other keyed row (a start
--    over or a retry sending a key another execution sent first; a key that went nowhere; every row
--    keyed before this migration) — those keep their entry.
--    When a send row goes (HISTORY_KEY_SENDS forgets it, the move takes it cold — only once no step
--    holds the key — or any later delete), `destination_key_sends_unnamed` clears the flag on the row
--    it named, which writes that row's entry then: every execution that sent a key stays found.
--    Recreating the indexes reads every row of `steps` and `work_items` once (CREATE INDEX, no row
--    rewritten): the cost is in docs/deploy.md.
--
-- 2. Key sends born kept: `guarded` = 1 at birth, whether the key declared a retention or not, so
--    the removal no longer marks the execution's unguarded sends kept (a row and its
--    `destination_key_sends_cold_due` entry, −2 at the removal; +1 at the birth: that entry).
--    What `guarded = 0` meant — the send goes on with its execution while it lives — is kept:
--    `destination_key_sends.unguarded` = 1 marks a send born unguarded (NULL: guarded, or written
--    before this migration). Such a send is taken by the HISTORY_KEY_SENDS sweep only once its
--    execution is gone (src/ledger/history.ts `sweepKeySendsOnce`); the move already takes a send
--    only when no step or item holds its key (its execution's sending step holds it while it lives).
--    So it is not looked at while its execution is kept (the move's scan, the sweep's walk), a send
--    born unguarded records as `retention_ms` its execution's shortest retention: it is not due before
--    its execution may be gone (later than before by about KEY_MEMORY_HOT; never earlier). A send
--    that a guarded step records again (ON CONFLICT) stops being `unguarded`, as it became guarded.
--    Sends born unguarded before this migration (guarded = 0) are still marked kept by the removal.
--
-- The new columns hold NULL or 1 and carry no CHECK: SQLite tests an added column's CHECK against
-- every existing row, a scan of the table (6.9 s of the 13.8 s measured on 900,000 steps).
ALTER TABLE steps ADD COLUMN key_first_send INTEGER;
ALTER TABLE work_items ADD COLUMN key_first_send INTEGER;
ALTER TABLE destination_key_sends ADD COLUMN unguarded INTEGER;

DROP INDEX steps_by_key;
CREATE INDEX steps_by_key ON steps (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL AND key_first_send IS NULL;
DROP INDEX work_items_by_key;
CREATE INDEX work_items_by_key ON work_items (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL AND key_first_send IS NULL;

DROP TRIGGER steps_key_sent_at_insert;
CREATE TRIGGER steps_key_sent_at_insert AFTER INSERT ON steps WHEN NEW.key_destination IS NOT NULL AND NEW.idempotency_key IS NOT NULL BEGIN INSERT INTO destination_key_sends (workspace, idempotency_key, destination, first_sent_at, counted_from, execution_id, vertex_id, guarded, retention_ms, unguarded) VALUES (NEW.workspace, NEW.idempotency_key, NEW.key_destination, NEW.created_at, NEW.created_at, NEW.execution_id, NEW.vertex_id, 1, CASE WHEN NEW.key_guarded > 1 THEN NEW.key_guarded WHEN coalesce(NEW.key_guarded, 0) = 0 THEN (SELECT min(x.retain_completed_ms, x.retain_failed_ms, x.retain_cancelled_ms) FROM executions x WHERE x.id = NEW.execution_id) END, CASE WHEN coalesce(NEW.key_guarded, 0) = 0 THEN 1 END) ON CONFLICT (workspace, idempotency_key, destination) DO UPDATE SET guarded = 1, retention_ms = CASE WHEN excluded.retention_ms > coalesce(retention_ms, 0) THEN excluded.retention_ms ELSE retention_ms END, unguarded = CASE WHEN excluded.unguarded IS NULL THEN NULL WHEN guarded = 0 THEN 1 ELSE unguarded END; END;

CREATE TRIGGER destination_key_sends_unnamed AFTER DELETE ON destination_key_sends WHEN instr(OLD.vertex_id, '#') = 0 BEGIN UPDATE steps SET key_first_send = NULL WHERE execution_id = OLD.execution_id AND vertex_id = OLD.vertex_id AND key_first_send = 1; END;
CREATE TRIGGER destination_key_sends_unnamed_item AFTER DELETE ON destination_key_sends WHEN instr(OLD.vertex_id, '#') > 0 BEGIN UPDATE work_items SET key_first_send = NULL WHERE execution_id = OLD.execution_id AND row_key = OLD.vertex_id AND key_first_send = 1; END;
