-- The hourly rollup behind the inspector's overview (SPEC section 15, docs/history.md "The hourly
-- rollup"): what idemflow stopped, per workspace, workflow and hour, kept after the executions it
-- was counted from are swept. Filled by the cron task src/stats/rollup-task.ts for closed hours only
-- (the hot path gains no statement); read by GET /v1/stats/series.
--
-- stats_hourly: one row per (workspace, workflow, hour) that had executions, and one per
-- (workspace, '', hour) — the workspace's row: every workflow of the hour summed, and the events
-- the workspace received in it (events belong to a workspace, not a workflow). A workflow id is
-- never '' (WORKFLOW_ID_PATTERN), so the two kinds cannot meet. `hour` is the hour's first
-- millisecond (UTC). An hour counts the executions CREATED in it, with their counters and status
-- as the latest roll found them, and the events RECEIVED in it with their duplicates.
--
-- Rolled by `INSERT … ON CONFLICT DO UPDATE` with values recomputed from the executions: the same
-- hour rolled twice is the same row. Counters only grow while an execution lives, and executions
-- only leave (the history sweep), so a re-roll keeps the larger of the stored and recomputed value
-- of every counter, and takes the recomputed statuses only when it saw every execution the stored
-- row counted: a re-roll after the sweep removed some never lowers a figure.
--
-- A rowid table (the bounded sweep's shape, src/ledger/sweep.ts); kept 400 days by `hour`.
CREATE TABLE stats_hourly (
  workspace             TEXT NOT NULL,
  workflow_id           TEXT NOT NULL CHECK (length(workflow_id) <= 64),
  hour                  INTEGER NOT NULL CHECK (hour % 3600000 = 0),
  executions            INTEGER NOT NULL DEFAULT 0 CHECK (executions >= 0),
  duplicate_triggers    INTEGER NOT NULL DEFAULT 0 CHECK (duplicate_triggers >= 0),
  redeliveries_stopped  INTEGER NOT NULL DEFAULT 0 CHECK (redeliveries_stopped >= 0),
  fenced_out_writes     INTEGER NOT NULL DEFAULT 0 CHECK (fenced_out_writes >= 0),
  destination_replays   INTEGER NOT NULL DEFAULT 0 CHECK (destination_replays >= 0),
  running               INTEGER NOT NULL DEFAULT 0 CHECK (running >= 0),
  completed             INTEGER NOT NULL DEFAULT 0 CHECK (completed >= 0),
  failed                INTEGER NOT NULL DEFAULT 0 CHECK (failed >= 0),
  cancelled             INTEGER NOT NULL DEFAULT 0 CHECK (cancelled >= 0),
  events_received       INTEGER NOT NULL DEFAULT 0 CHECK (events_received >= 0),
  duplicate_events      INTEGER NOT NULL DEFAULT 0 CHECK (duplicate_events >= 0),
  -- When the row was last rolled (the task's clock): the only member a second roll changes.
  rolled_at             INTEGER NOT NULL,
  PRIMARY KEY (workspace, workflow_id, hour)
);
-- The retention sweep walks this index (oldest first); the series reads the primary key's range.
CREATE INDEX stats_hourly_age ON stats_hourly (hour);

-- How far each pass of the rollup has come on this database: every hour before `next_hour` has had
-- that pass. `closed` rolls an hour 5 minutes after it ends, `settled` an hour later (retries and
-- redeliveries of its executions), `final` a day later (the default 24 h dedupe window of its
-- triggers has ended). GET /v1/stats/series computes the hours from `closed`'s mark on live.
CREATE TABLE stats_rollup_marks (
  pass       TEXT PRIMARY KEY CHECK (pass IN ('closed', 'settled', 'final')),
  next_hour  INTEGER NOT NULL CHECK (next_hour % 3600000 = 0)
) WITHOUT ROWID;
