-- Waits (SPEC section 14, docs/waits.md): a DELAY step sleeps as a PARKED step — EXECUTING with
-- `parked_until` set and its lease until then — so nothing runs and nothing is held while it
-- sleeps, and its resume is an ordinary claim once the time came (fenced by the epoch like every
-- claim: a wake-up delivered twice resumes it once). No rebuild of `steps`: two added columns.
--
--   parked_until  when the parked step resumes (NULL for every step that is not parked); the
--                 partial index below is the wake index the cron's wake-up task reads;
--   wake_at       the DELAY's wake time, computed once and persisted like a destination key: a
--                 takeover or a chained run never recomputes `until`.
ALTER TABLE steps ADD COLUMN parked_until INTEGER;
ALTER TABLE steps ADD COLUMN wake_at INTEGER;
CREATE INDEX steps_parked ON steps (parked_until) WHERE parked_until IS NOT NULL;

-- An attempt that parked its step ends as 'slept' (its claim is over; the resume is a new claim).
-- `outcome` has a CHECK, so step_attempts is rebuilt to widen it: the one rebuild of waits, on a
-- table bounded to 20 rows per step (src/ledger/attempts.ts MAX_ATTEMPTS_KEPT). Same columns,
-- same constraints otherwise, same index.
CREATE TABLE step_attempts_new (
  execution_id     TEXT NOT NULL,
  vertex_id        TEXT NOT NULL,
  epoch            INTEGER NOT NULL CHECK (epoch >= 1),
  attempt          INTEGER NOT NULL CHECK (attempt >= 1),
  outcome          TEXT NOT NULL CHECK (outcome IN ('running', 'completed', 'failed', 'retried', 'in_progress', 'lost', 'cancelled', 'slept')),
  started_at       INTEGER NOT NULL,
  finished_at      INTEGER CHECK (finished_at IS NULL OR finished_at >= started_at),
  idempotency_key  TEXT CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
  request          TEXT CHECK (request IS NULL OR length(CAST(request AS BLOB)) <= 8192),
  response_status  INTEGER CHECK (response_status IS NULL OR response_status BETWEEN 100 AND 999),
  response         TEXT CHECK (response IS NULL OR length(CAST(response AS BLOB)) <= 8192),
  error            TEXT CHECK (error IS NULL OR length(error) <= 2000),
  delay_ms         INTEGER CHECK (delay_ms IS NULL OR delay_ms >= 0),
  delay_reason     TEXT CHECK (delay_reason IS NULL OR delay_reason IN ('backoff', 'retry-after', 'in-progress')),
  seq              INTEGER CHECK (seq IS NULL OR seq >= 1),
  ev_mark          INTEGER CHECK (ev_mark IS NULL OR ev_mark >= 0),
  PRIMARY KEY (execution_id, vertex_id, epoch),
  CHECK ((finished_at IS NULL) = (outcome IN ('running', 'lost'))),
  CHECK ((delay_ms IS NOT NULL) = (outcome IN ('retried', 'in_progress'))),
  CHECK ((delay_reason IS NULL) = (delay_ms IS NULL)),
  CHECK ((coalesce(delay_reason, '') = 'in-progress') = (outcome = 'in_progress')),
  CHECK ((response IS NULL) = (response_status IS NULL))
) WITHOUT ROWID;
INSERT INTO step_attempts_new SELECT execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key,
  request, response_status, response, error, delay_ms, delay_reason, seq, ev_mark FROM step_attempts;
DROP TABLE step_attempts;
ALTER TABLE step_attempts_new RENAME TO step_attempts;
CREATE INDEX step_attempts_changes ON step_attempts (execution_id, ev_mark, seq);
