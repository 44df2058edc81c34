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
  -- The identity hash this execution was started under (NULL for forced runs: they have none).
  identity             TEXT CHECK (identity IS NULL OR length(identity) = 64),
  status               TEXT NOT NULL DEFAULT 'RUNNING' CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED')),
  payload              TEXT NOT NULL,           -- the trigger payload as JSON text
  -- Duplicate deliveries of this execution's trigger, mirrored from its identity row in the
  -- claim's transaction, so the count outlives the identity (which is swept after its window).
  duplicate_deliveries INTEGER NOT NULL DEFAULT 0 CHECK (duplicate_deliveries >= 0),
  last_duplicate_at    INTEGER,
  started_over_from    TEXT REFERENCES executions(id),
  created_at           INTEGER NOT NULL,
  updated_at           INTEGER NOT NULL,
  finished_at          INTEGER,
  -- An execution is finished exactly when its status is final.
  CHECK ((status = 'RUNNING') = (finished_at IS NULL)),
  CHECK ((identity IS NULL) = (identity_kind = 'forced'))
);

CREATE INDEX executions_by_workspace ON executions (workspace, created_at DESC, id);
CREATE INDEX executions_by_workflow ON executions (workspace, workflow_id, status, created_at DESC);

-- The dedupe window: one row per live trigger identity. The primary key IS the dedupe: the claim
-- is one `INSERT … ON CONFLICT (identity) DO UPDATE` (src/ledger/executions.ts), which either
-- creates the row (a new execution), counts a duplicate (fresh row), or takes the row over for a
-- new window (expired row) with a new execution id and the claimant's `claim_token`. Whoever's
-- token the row holds after the claim is the one request that writes the execution.
--
-- The identity is SHA-256 over the scope, so a workspace is already part of it; `workspace` and
-- `workflow_id` are kept for operators.
CREATE TABLE execution_identities (
  identity              TEXT PRIMARY KEY CHECK (length(identity) = 64),
  workspace             TEXT NOT NULL,
  workflow_id           TEXT NOT NULL,
  execution_id          TEXT NOT NULL,
  claim_token           TEXT NOT NULL,
  window_start          INTEGER NOT NULL,
  expires_at            INTEGER NOT NULL,
  duplicate_deliveries  INTEGER NOT NULL DEFAULT 0 CHECK (duplicate_deliveries >= 0),
  last_duplicate_at     INTEGER,
  CHECK (expires_at > window_start),
  CHECK ((duplicate_deliveries = 0) = (last_duplicate_at IS NULL))
);

-- The bounded sweep of expired identities walks this index.
CREATE INDEX execution_identities_expiry ON execution_identities (expires_at);
