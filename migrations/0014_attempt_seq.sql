-- The execution's change stream (GET /v1/executions/{id}/events, docs/events.md): every change of
-- an attempt row gets a place in one order with the execution's step events, so an event id is a
-- position that means the same on every connection and a resume delivers exactly what follows it.
--
--   seq      the execution's attempt change counter: max(seq) + 1 of the execution's attempts,
--            set by the statements that already open, finish, lose and cancel an attempt
--            (src/ledger/attempts.ts, operator.ts) — no statement and no round trip is added;
--   ev_mark  the execution's newest step event id when the row last changed (0 without one).
-- An attempt change sorts at (ev_mark, seq), a step event at (id, 0): writes are serialised, so
-- that order is the commit order (a step event written after the change has an id > ev_mark).
-- A change rewrites both, so a row is at the place of its latest change (the stream compacts).
ALTER TABLE step_attempts ADD COLUMN seq INTEGER CHECK (seq IS NULL OR seq >= 1);
ALTER TABLE step_attempts ADD COLUMN ev_mark INTEGER CHECK (ev_mark IS NULL OR ev_mark >= 0);

-- Existing rows: numbered per execution by when they last changed, placed after the step events
-- recorded up to then.
UPDATE step_attempts
   SET seq = (SELECT n.rn FROM (SELECT r.vertex_id AS v, r.epoch AS e,
                                       row_number() OVER (ORDER BY coalesce(r.finished_at, r.started_at), r.vertex_id, r.epoch) AS rn
                                FROM step_attempts r WHERE r.execution_id = step_attempts.execution_id) n
              WHERE n.v = step_attempts.vertex_id AND n.e = step_attempts.epoch),
       ev_mark = (SELECT coalesce(max(ev.id), 0) FROM step_events ev
                  WHERE ev.execution_id = step_attempts.execution_id AND ev.at <= coalesce(step_attempts.finished_at, step_attempts.started_at));

CREATE INDEX step_attempts_changes ON step_attempts (execution_id, ev_mark, seq);
-- The stream's read of step events, and the ev_mark of an attempt write.
CREATE INDEX step_events_by_execution ON step_events (execution_id, id);
