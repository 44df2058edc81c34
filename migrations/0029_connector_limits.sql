-- Flow control per destination (SPEC section 17, docs/connectors.md "Limits"): a connector's
-- `limits` (concurrency, a token bucket's rate and burst) are operational — not part of any hashed
-- workflow version — so they live in a row of their own per scope (workspace, connector), written
-- by the connector's save and read by every send. No table rebuild: two new tables and one added
-- column of `steps`.
--
--   connector_limits   one row per limited scope: the limits, the bucket (tokens as of tokens_at),
--                      the shared pause a 429/503 with Retry-After set, and the sends held back.
--   connector_permits  one row per step that holds (held = 1) or waits for (held = 0) a permit of
--                      the scope. A held permit counts only while its step is EXECUTING under the
--                      same epoch, unparked, with a live lease: the permit's lease IS the step's
--                      lease (the heartbeat keeps both; a dead worker's returns when it expires).
--                      `since`: when the step first asked (kept across its wake-ups: the fairness
--                      order); `reason` and `ahead`: why the last ask was refused.
--   steps.permit_wait  the step's permit wait for the trace: JSON { connector, since, until,
--                      reason, grantedAt } (NULL if it never waited).
CREATE TABLE connector_limits (
  workspace       TEXT NOT NULL,
  connector       TEXT NOT NULL CHECK (length(connector) BETWEEN 1 AND 64),
  concurrency     INTEGER CHECK (concurrency IS NULL OR concurrency BETWEEN 1 AND 1000),
  rate_count      INTEGER CHECK (rate_count IS NULL OR rate_count >= 1),
  rate_period_ms  INTEGER CHECK (rate_period_ms IS NULL OR rate_period_ms IN (1000, 60000, 3600000)),
  burst           INTEGER CHECK (burst IS NULL OR burst >= 1),
  tokens          REAL NOT NULL DEFAULT 0,
  tokens_at       INTEGER NOT NULL,
  paused_until    INTEGER,
  pause_reason    TEXT CHECK (pause_reason IS NULL OR length(pause_reason) <= 500),
  held_back       INTEGER NOT NULL DEFAULT 0 CHECK (held_back >= 0),
  updated_at      INTEGER NOT NULL,
  PRIMARY KEY (workspace, connector),
  CHECK ((rate_count IS NULL) = (rate_period_ms IS NULL) AND (rate_count IS NULL) = (burst IS NULL))
);

CREATE TABLE connector_permits (
  workspace     TEXT NOT NULL,
  connector     TEXT NOT NULL,
  execution_id  TEXT NOT NULL,
  vertex_id     TEXT NOT NULL,
  epoch         INTEGER NOT NULL CHECK (epoch >= 1),
  held          INTEGER NOT NULL CHECK (held IN (0, 1)),
  since         INTEGER NOT NULL,
  granted_at    INTEGER,
  reason        TEXT CHECK (reason IS NULL OR reason IN ('paused', 'rate', 'concurrency', 'fairness')),
  ahead         INTEGER NOT NULL DEFAULT 0 CHECK (ahead >= 0),
  PRIMARY KEY (workspace, connector, execution_id, vertex_id),
  CHECK ((held = 1) = (granted_at IS NOT NULL))
);
CREATE INDEX connector_permits_line ON connector_permits (workspace, connector, held, since);

ALTER TABLE steps ADD COLUMN permit_wait TEXT CHECK (permit_wait IS NULL OR length(permit_wait) <= 2000);
