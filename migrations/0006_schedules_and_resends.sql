-- Scheduled runs (docs/ingress.md "Schedules") and the reaper's re-send back-off (docs/steps.md
-- "Reaper"). Owned by src/ledger/schedule-runs.ts and src/ledger/steps.ts.

-- One row per (workflow, cron, scheduled minute): written for every workflow on the cron when
-- its tick arrives, then started in bounded batches. A row is open (finished_at NULL) while
-- PENDING, STARTING (claimed by an invocation until lease_until) or FAILED (error kept; retried
-- while the minute is recent); it closes as STARTED (execution_id), SKIPPED (the workflow no
-- longer has this schedule) or EXPIRED (the minute stopped being recent before a start worked).
--   PENDING|FAILED|STARTING (lease expired) --claim--> STARTING --start--> STARTED | FAILED
--   open, minute no longer recent --expire--> EXPIRED
CREATE TABLE schedule_runs (
  workspace     TEXT NOT NULL,
  workflow_id   TEXT NOT NULL,
  scheduled_at  INTEGER NOT NULL,   -- the scheduled minute (ms), the tick's identity
  cron          TEXT NOT NULL,
  status        TEXT NOT NULL CHECK (status IN ('PENDING', 'STARTING', 'STARTED', 'FAILED', 'SKIPPED', 'EXPIRED')),
  attempts      INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  lease_until   INTEGER,
  execution_id  TEXT,
  error         TEXT,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  finished_at   INTEGER,
  PRIMARY KEY (workspace, workflow_id, scheduled_at, cron),
  CHECK ((status = 'STARTING') = (lease_until IS NOT NULL)),
  CHECK ((status IN ('STARTED', 'SKIPPED', 'EXPIRED')) = (finished_at IS NOT NULL)),
  CHECK (status <> 'STARTED' OR execution_id IS NOT NULL)
);
-- The claim and the expiry read only open rows; the retention sweep reads by age.
CREATE INDEX schedule_runs_open ON schedule_runs (scheduled_at) WHERE finished_at IS NULL;
CREATE INDEX schedule_runs_by_minute ON schedule_runs (scheduled_at);

-- The reaper's re-sends of an overdue DISPATCHED step back off: `resends` counts them (the trace
-- shows it), `next_resend_at` is when the next one is due (NULL: not re-sent since the step was
-- last claimed, so it is due `overdueMs` after `available_at`).
ALTER TABLE steps ADD COLUMN resends INTEGER NOT NULL DEFAULT 0 CHECK (resends >= 0);
ALTER TABLE steps ADD COLUMN next_resend_at INTEGER;
-- Two sweeps, each an index range: first re-sends (by available_at), later ones (by next_resend_at).
CREATE INDEX steps_first_resend_due ON steps (available_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NULL;
CREATE INDEX steps_next_resend_due ON steps (next_resend_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL;
