-- Key memory: a hot period per key (docs/history.md "Key memory: hot and cold"). A kept key send
-- stays in D1 while its destination may still remember the key — its declared retention, counted
-- from `counted_from` — plus `KEY_MEMORY_HOT` (the margin; the whole period for a send recorded
-- without a retention). Retentions run from 24 h to 365 d, so one deployment-wide period either
-- moved a 30-day key cold while its destination still remembers it (every late retry one R2 read)
-- or kept 24-hour keys hot for weeks. No table rebuild: two ADD COLUMNs, one index replaced, one
-- trigger replaced (same name, same statement, one more column).
--
--   destination_key_sends.retention_ms  the retention the key declared when its send was recorded
--                    (the gateway's rule: the key's own, or its profile's); NULL for a send recorded
--                    before this migration or without one (an unguarded send later kept).
--   destination_key_sends_cold_due  replaces `destination_key_sends_guarded_age` (counted_from): the
--                    kept sends by when their destination forgets them, `counted_from +
--                    coalesce(retention_ms, 0)`. The move walks it up to `now - KEY_MEMORY_HOT`:
--                    every entry in that range is due (none is skipped for being too young, whatever
--                    its retention), and it costs the same index entry as the one it replaces. The
--                    move's cursor (`key_move_cursor.counted_from`) now holds this value. The
--                    HISTORY_KEY_SENDS sweep walks it too (a send with a retention is forgotten up to
--                    that retention later than its horizon: later, never earlier).
--   steps_key_sent_at_insert  the start batch's chained first step records its key's retention:
--                    `steps.key_guarded` carries it (0 unguarded; 1 guarded with no retention known,
--                    as before; above 1 the declared retention in ms, guarded). The body is 0024's
--                    with `retention_ms` added; one statement, no inner END.
ALTER TABLE destination_key_sends ADD COLUMN retention_ms INTEGER CHECK (retention_ms IS NULL OR retention_ms > 0);

DROP INDEX destination_key_sends_guarded_age;
-- The cursor held a `counted_from`; the scan starts over from the head of the new order.
DELETE FROM key_move_cursor;
CREATE INDEX destination_key_sends_cold_due ON destination_key_sends (counted_from + coalesce(retention_ms, 0)) WHERE guarded = 1;

DROP TRIGGER steps_key_sent_at_insert;
CREATE TRIGGER steps_key_sent_at_insert AFTER INSERT ON steps WHEN NEW.key_destination IS NOT NULL AND NEW.idempotency_key IS NOT NULL BEGIN INSERT INTO destination_key_sends (workspace, idempotency_key, destination, first_sent_at, counted_from, execution_id, vertex_id, guarded, retention_ms) VALUES (NEW.workspace, NEW.idempotency_key, NEW.key_destination, NEW.created_at, NEW.created_at, NEW.execution_id, NEW.vertex_id, CASE WHEN coalesce(NEW.key_guarded, 0) > 0 THEN 1 ELSE 0 END, CASE WHEN NEW.key_guarded > 1 THEN NEW.key_guarded END) ON CONFLICT (workspace, idempotency_key, destination) DO UPDATE SET guarded = max(guarded, excluded.guarded), retention_ms = CASE WHEN excluded.retention_ms > coalesce(retention_ms, 0) THEN excluded.retention_ms ELSE retention_ms END; END;
