-- Steps of an execution (SPEC section 4). Owned by src/ledger/steps.ts.
-- One row per (execution, vertex). Times are integer milliseconds since the Unix epoch.

CREATE TABLE steps (
  execution_id     TEXT NOT NULL REFERENCES executions(id),
  vertex_id        TEXT NOT NULL,
  workspace        TEXT NOT NULL,
  state            TEXT NOT NULL CHECK (state IN ('DISPATCHED', 'EXECUTING', 'COMPLETED', 'FAILED', 'SKIPPED')),
  epoch            INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),   -- fencing token, +1 on every claim
  attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  available_at     INTEGER NOT NULL,          -- DISPATCHED: when the step may be claimed
  lease_until      INTEGER,                   -- EXECUTING: when the claim expires
  idempotency_key  TEXT,                      -- Gateway: computed at the first attempt, then reused
  request          TEXT,                      -- redacted request summary (JSON)
  output           TEXT,                      -- JSON
  error            TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  PRIMARY KEY (execution_id, vertex_id),
  CHECK ((state = 'EXECUTING') = (lease_until IS NOT NULL)),
  CHECK ((state IN ('COMPLETED', 'FAILED', 'SKIPPED')) = (finished_at IS NOT NULL))
);

-- The reaper's two sweeps: overdue DISPATCHED steps and expired EXECUTING leases.
CREATE INDEX steps_dispatched_due ON steps (available_at) WHERE state = 'DISPATCHED';
CREATE INDEX steps_lease_expiry ON steps (lease_until) WHERE state = 'EXECUTING';

-- Things that happened to a step that its row alone cannot show (fenced-out writes, retries…).
CREATE TABLE step_events (
  id            INTEGER PRIMARY KEY,
  execution_id  TEXT NOT NULL,
  vertex_id     TEXT NOT NULL,
  type          TEXT NOT NULL,
  epoch         INTEGER,
  at            INTEGER NOT NULL,
  detail        TEXT
);
CREATE INDEX step_events_by_step ON step_events (execution_id, vertex_id, id);
