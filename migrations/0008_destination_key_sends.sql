-- When each destination key was first sent to each destination: the retention guard's memory
-- (src/steps/gateway/retention.ts, docs/steps.md "The retention guard"). One row per workspace,
-- destination (the URL's origin: scheme, host and port) and key, NOT per step: a start over sends
-- the same key from a new execution, and must find the time of the first send.
--
-- first_sent_at: when the key was persisted, just before its first send (an earlier time than
--   the send itself, so the guard errs toward refusing). Never changes.
-- counted_from:  where the destination's retention counts from: first_sent_at, or the time of an
--   operator retry that acknowledged the destination may have forgotten the key (its re-send
--   starts the destination's memory over).
-- execution_id, vertex_id: the step that sent it first (for the trace and the refusal's message).
--
-- Rows are never swept: once a key is older than its retention the guard refuses to re-send it,
-- and a missing row would let a start over send it silently. A row is ~150 bytes per key.
CREATE TABLE destination_key_sends (
  workspace      TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  destination    TEXT NOT NULL,
  first_sent_at  INTEGER NOT NULL,
  counted_from   INTEGER NOT NULL CHECK (counted_from >= first_sent_at),
  execution_id   TEXT NOT NULL,
  vertex_id      TEXT NOT NULL,
  PRIMARY KEY (workspace, idempotency_key, destination)
) WITHOUT ROWID;

-- Keys persisted before this table existed: their step's creation is a time no later than their
-- first send, and the request summary of an attempt names the URL they went to. A step whose
-- key was persisted but whose attempt recorded no request gets its row at its next attempt
-- (src/steps/gateway/retention.ts), dated from the step's creation the same way.
INSERT OR IGNORE INTO destination_key_sends (workspace, idempotency_key, destination, first_sent_at, counted_from, execution_id, vertex_id)
SELECT s.workspace, s.idempotency_key, origin, s.created_at, s.created_at, s.execution_id, s.vertex_id
FROM (
  SELECT *,
         CASE WHEN instr(rest, '/') > 0 THEN substr(url, 1, instr(url, '//') + instr(rest, '/')) ELSE url END AS origin
  FROM (
    SELECT st.*, json_extract(st.request, '$.url') AS url,
           substr(json_extract(st.request, '$.url'), instr(json_extract(st.request, '$.url'), '//') + 2) AS rest
    FROM steps st
    WHERE st.idempotency_key IS NOT NULL AND json_valid(st.request) AND json_extract(st.request, '$.url') LIKE 'http%://%'
  )
) s;
