-- Executions and their trigger identities (SPEC section 3). Owned by src/ledger/executions.ts.
-- Times are integer milliseconds since the Unix epoch; the clock is always a statement parameter.

CREATE TABLE executions (
  id                   TEXT PRIMARY KEY,
  workspace            TEXT NOT NULL,
  workflow_id          TEXT NOT NULL,
  version              TEXT NOT NULL,
  entry_vertex_id      TEXT NOT NULL,
  trigger_kind         TEXT NOT NULL CHECK (trigger_kind IN ('webhook', 'test', 'stream', 'schedule', 'start_over')),
  identity_kind        TEXT NOT NULL CHECK (identity_kind IN ('content', 'fields', 'client', 'schedule', 'forced')),
  status               TEXT NOT NULL DEFAULT 'RUNNING' CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED')),
  payload              TEXT NOT NULL,           -- the trigger payload as JSON text
  duplicate_deliveries INTEGER NOT NULL DEFAULT 0 CHECK (duplicate_deliveries >= 0),
  last_duplicate_at    INTEGER,
  started_over_from    TEXT REFERENCES executions(id),
  created_at           INTEGER NOT NULL,
  updated_at           INTEGER NOT NULL,
  finished_at          INTEGER,
  -- An execution is finished exactly when its status is final.
  CHECK ((status = 'RUNNING') = (finished_at IS NULL))
);

CREATE INDEX executions_by_workspace ON executions (workspace, created_at DESC, id);
CREATE INDEX executions_by_workflow ON executions (workspace, workflow_id, status, created_at DESC);
