-- Every attempt of a step on record (SPEC section 4, docs/steps.md "Attempts"). Owned by
-- src/ledger/attempts.ts; written only inside batches that already run (no extra round trip):
--   the claim batch    opens the row of the epoch just claimed, marks older open rows 'lost' and
--                      keeps the newest 20 rows of the step (older ones are deleted there);
--   the persist batch  records the key of a first attempt (later attempts copy it at the claim);
--   the batch that ends the attempt (settle, retry, in-progress re-check) finishes it, fenced:
--                      a worker fenced out writes nothing here.
-- One row per (execution, vertex, epoch): a claim is the only thing that creates an epoch, so a
-- late worker can never write over the row of the attempt that replaced it.
--
-- outcome: running      claimed, not finished yet;
--          completed    settled COMPLETED;            failed       settled FAILED;
--          retried      back to DISPATCHED for a counted retry (delay_reason backoff | retry-after);
--          in_progress  the destination said "in progress", asked again later (delay_reason in-progress);
--          lost         a newer claim took the step over while this one was open (its worker died or
--                       stalled past its lease): started, never finished;
--          cancelled    its execution was cancelled while it ran (src/ledger/operator.ts
--                       `cancelExecution`); finished at the cancel — a call it sent cannot be unsent.
-- Every stored text is bounded (src/ledger/attempts.ts): request and response summaries at 8 KiB
-- of JSON, the error at 2,000 characters. Nothing secret: the request summary is the redacted one
-- the step row keeps, the response is the step output's (allowlisted headers, secrets scrubbed).
CREATE TABLE step_attempts (
  execution_id     TEXT NOT NULL,
  vertex_id        TEXT NOT NULL,
  epoch            INTEGER NOT NULL CHECK (epoch >= 1),
  attempt          INTEGER NOT NULL CHECK (attempt >= 1),   -- the step's attempt counter at the claim
  outcome          TEXT NOT NULL CHECK (outcome IN ('running', 'completed', 'failed', 'retried', 'in_progress', 'lost', 'cancelled')),
  started_at       INTEGER NOT NULL,
  finished_at      INTEGER CHECK (finished_at IS NULL OR finished_at >= started_at),
  idempotency_key  TEXT CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
  request          TEXT CHECK (request IS NULL OR length(CAST(request AS BLOB)) <= 8192),
  response_status  INTEGER CHECK (response_status IS NULL OR response_status BETWEEN 100 AND 999),
  response         TEXT CHECK (response IS NULL OR length(CAST(response AS BLOB)) <= 8192),
  error            TEXT CHECK (error IS NULL OR length(error) <= 2000),
  delay_ms         INTEGER CHECK (delay_ms IS NULL OR delay_ms >= 0),
  delay_reason     TEXT CHECK (delay_reason IS NULL OR delay_reason IN ('backoff', 'retry-after', 'in-progress')),
  PRIMARY KEY (execution_id, vertex_id, epoch),
  -- Finished exactly when the attempt ended by its own batch (a lost attempt never finished).
  CHECK ((finished_at IS NULL) = (outcome IN ('running', 'lost'))),
  -- A delay, with its reason, exactly when the step went back to DISPATCHED; "in-progress" only for the re-check.
  CHECK ((delay_ms IS NOT NULL) = (outcome IN ('retried', 'in_progress'))),
  CHECK ((delay_reason IS NULL) = (delay_ms IS NULL)),
  CHECK ((coalesce(delay_reason, '') = 'in-progress') = (outcome = 'in_progress')),
  -- A response summary comes with its status.
  CHECK ((response IS NULL) = (response_status IS NULL))
) WITHOUT ROWID;
