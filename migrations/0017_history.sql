-- History (SPEC section 12, docs/history.md): retention, the history sweep, tombstones, the
-- executions counter, and which key sends outlive their executions.
--
-- Retention per execution, in ms, for each way it can end. The start batch writes the effective
-- retention (the workflow's `history`, else the deployment's HISTORY_* vars, never shorter than
-- the entry point's dedupe window: src/history/retention.ts). Executions from before this
-- migration get the deployment defaults of SPEC section 12 (completed 7 days, failed and
-- cancelled 30 days); the sweep never removes one whose identity is still inside its window.
ALTER TABLE executions ADD COLUMN retain_completed_ms INTEGER NOT NULL DEFAULT 604800000 CHECK (retain_completed_ms >= 60000);
ALTER TABLE executions ADD COLUMN retain_failed_ms INTEGER NOT NULL DEFAULT 2592000000 CHECK (retain_failed_ms >= 60000);
ALTER TABLE executions ADD COLUMN retain_cancelled_ms INTEGER NOT NULL DEFAULT 2592000000 CHECK (retain_cancelled_ms >= 60000);

-- The sweep found this execution due but its chain (start overs, reuse after failure) not: it is
-- looked at again from this time, so a held execution does not sit at the head of the sweep's index.
ALTER TABLE executions ADD COLUMN sweep_held_until INTEGER;

-- When the sweep may remove the execution: derived, never written, so every statement that
-- finishes an execution (settle, cancel) or reopens one (operator retry: finished_at NULL again)
-- moves it with no change of its own. NULL while RUNNING (SQLite's max() of a NULL is NULL).
-- D1 supports generated columns added by ALTER TABLE, and indexes on them
-- (developers.cloudflare.com/d1/reference/generated-columns/). iif(), not CASE … END: wrangler's statement splitter has mistaken a CASE's END for the end of a
-- block (workers-sdk #15162), and this file must split the same locally and on a remote apply.
ALTER TABLE executions ADD COLUMN purge_at INTEGER GENERATED ALWAYS AS (
  max(finished_at + iif(status = 'COMPLETED', retain_completed_ms, iif(status = 'FAILED', retain_failed_ms, retain_cancelled_ms)),
      coalesce(sweep_held_until, 0))
) VIRTUAL;
CREATE INDEX executions_purge_due ON executions (purge_at) WHERE purge_at IS NOT NULL;

-- What is left of a removed execution: enough to say when and why it went (GET answers 404 or the
-- archived trace from it), and to keep its id from being given to another run while it lives (the
-- identity claim reads it: an execution's id is its trigger identity when no row holds that id).
-- Kept as long again as the execution's own retention (`expires_at`), then swept.
CREATE TABLE execution_tombstones (
  id           TEXT PRIMARY KEY,
  workspace    TEXT NOT NULL,
  workflow_id  TEXT NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('COMPLETED', 'FAILED', 'CANCELLED')),
  created_at   INTEGER NOT NULL,
  finished_at  INTEGER NOT NULL,
  removed_at   INTEGER NOT NULL,
  reason       TEXT NOT NULL CHECK (reason IN ('retention', 'erased')),
  -- 1: the trace is in the ARCHIVE bucket (src/history/archive.ts names the object).
  archived     INTEGER NOT NULL CHECK (archived IN (0, 1)),
  expires_at   INTEGER NOT NULL,
  CHECK (expires_at > removed_at),
  CHECK (reason = 'retention' OR archived = 0)
) WITHOUT ROWID;
CREATE INDEX execution_tombstones_expiry ON execution_tombstones (expires_at);

-- Key sends the retention guard reads (the key declares how long its destination remembers it)
-- are kept for good: deleting one would let a later execution re-send a key the destination has
-- forgotten. A key with no declared retention (the header form, a profile without one) is never
-- guarded, and its row goes with its execution. Rows from before this migration count as guarded.
ALTER TABLE destination_key_sends ADD COLUMN guarded INTEGER NOT NULL DEFAULT 1 CHECK (guarded IN (0, 1));
CREATE INDEX destination_key_sends_unguarded ON destination_key_sends (execution_id) WHERE guarded = 0;
-- With HISTORY_KEY_SENDS set to a duration (not the default "forever"), guarded rows older than it
-- go, oldest first (docs/history.md names the risk).
CREATE INDEX destination_key_sends_guarded_age ON destination_key_sends (counted_from) WHERE guarded = 1;

-- Dead letters have no execution column: they are swept by age (src/history/sweep.ts).
CREATE INDEX dead_letters_by_age ON dead_letters (at);

-- Executions retained, for the operator's storage figures without a count(*) scan. Kept by two
-- one-statement triggers (upper-case BEGIN/END, no inner END: the shape wrangler's statement
-- splitter keeps whole on a remote apply).
CREATE TABLE history_counters (
  name   TEXT PRIMARY KEY,
  value  INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO history_counters (name, value) SELECT 'executions', count(*) FROM executions;
CREATE TRIGGER executions_counted_in AFTER INSERT ON executions BEGIN UPDATE history_counters SET value = value + 1 WHERE name = 'executions'; END;
CREATE TRIGGER executions_counted_out AFTER DELETE ON executions BEGIN UPDATE history_counters SET value = value - 1 WHERE name = 'executions'; END;

-- One history sweep at a time per database: every cron string runs the periodic tasks, and a sweep
-- that is behind continues through the queue (src/history/sweep.ts). The holder's lease ends at
-- `lease_until`; a crashed holder's lease simply runs out.
CREATE TABLE sweep_leases (
  name         TEXT PRIMARY KEY,
  holder       TEXT NOT NULL,
  lease_until  INTEGER NOT NULL
) WITHOUT ROWID;
