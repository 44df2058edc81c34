-- Steps of an execution (SPEC section 4). Owned by src/ledger/steps.ts; ingress inserts the
-- rows it decides at start (src/ledger/executions.ts). One row per (execution, vertex).
-- Times are integer milliseconds since the Unix epoch; the clock is always a statement parameter.
--
-- State machine (docs/steps.md has the diagram):
--   DISPATCHED --claim--> EXECUTING --settle--> COMPLETED | FAILED
--   EXECUTING --retryable failure--> DISPATCHED (available_at in the future)
--   EXECUTING (lease expired) --claim (takeover) or reaper--> EXECUTING (epoch+1) | DISPATCHED
--   FAILED --operator retry--> DISPATCHED
--   (decided without running) SKIPPED

CREATE TABLE steps (
  execution_id     TEXT NOT NULL REFERENCES executions(id),
  vertex_id        TEXT NOT NULL,
  workspace        TEXT NOT NULL,
  state            TEXT NOT NULL CHECK (state IN ('DISPATCHED', 'EXECUTING', 'COMPLETED', 'FAILED', 'SKIPPED')),
  epoch            INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),   -- fencing token, +1 on every claim
  attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  -- The attempt count when an operator retry reopened the step: the retry policy's budget
  -- counts from here, while `attempt` keeps counting (the trace shows the true total).
  retry_base       INTEGER NOT NULL DEFAULT 0 CHECK (retry_base >= 0 AND retry_base <= attempt),
  available_at     INTEGER NOT NULL,          -- DISPATCHED: when the step may be claimed
  lease_until      INTEGER,                   -- EXECUTING: when the claim expires
  idempotency_key  TEXT CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
  request          TEXT,                      -- redacted request summary (JSON)
  output           TEXT,                      -- JSON
  -- COMPLETED: JSON array of the successors whose edges this step took (edge `when` decided by
  -- the settling worker). Fan-in decisions read it inside the settle batch (src/ledger/steps.ts).
  next_vertices    TEXT,
  error            TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  PRIMARY KEY (execution_id, vertex_id),
  CHECK ((state = 'EXECUTING') = (lease_until IS NOT NULL)),
  CHECK ((state IN ('COMPLETED', 'FAILED', 'SKIPPED')) = (finished_at IS NOT NULL)),
  -- A claimed step always carries the epoch of its claim.
  CHECK (state <> 'EXECUTING' OR epoch >= 1)
);

-- The reaper's two sweeps: overdue DISPATCHED steps and expired EXECUTING leases.
CREATE INDEX steps_dispatched_due ON steps (available_at) WHERE state = 'DISPATCHED';
CREATE INDEX steps_lease_expiry ON steps (lease_until) WHERE state = 'EXECUTING';

-- Things that happened to a step that its row alone cannot show: a late write fenced out, an
-- attempt that failed and was retried, a lease that expired, an operator retry, a dead letter.
CREATE TABLE step_events (
  id            INTEGER PRIMARY KEY,
  execution_id  TEXT NOT NULL,
  vertex_id     TEXT NOT NULL,
  -- redelivery_dropped: a redundant message was acked instead of retried (the step was settled,
  -- or waiting under a live lease / for its due time, which the reaper covers); see docs/steps.md.
  type          TEXT NOT NULL CHECK (
                  type IN ('fenced_out', 'attempt_failed', 'lease_expired', 'operator_retry', 'dead_lettered', 'redelivery_dropped')
                ),
  epoch         INTEGER,
  at            INTEGER NOT NULL,
  detail        TEXT
);
CREATE INDEX step_events_by_step ON step_events (execution_id, vertex_id, id);

-- Messages that reached the dead-letter queue (after the queue's max_retries). Kept for
-- operators; the step itself is healed by the reaper (an overdue DISPATCHED step is re-sent).
CREATE TABLE dead_letters (
  id           INTEGER PRIMARY KEY,
  queue        TEXT NOT NULL,
  message_id   TEXT NOT NULL,
  body         TEXT NOT NULL,      -- the message body as JSON text (bounded)
  attempts     INTEGER NOT NULL,
  at           INTEGER NOT NULL,
  -- The step's state when the dead letter arrived (NULL: not a step message, or no such step):
  -- COMPLETED / SKIPPED / FAILED, or a live lease, mean the dead letter was harmless.
  step_state   TEXT
);
