-- Saved workflow definitions (SPEC section 2). Immutable: a version is the SHA-256 of the
-- definition's canonical JSON (RFC 8785), so saving the same content twice is one row.

CREATE TABLE workflow_versions (
  workspace     TEXT NOT NULL,
  workflow_id   TEXT NOT NULL,
  version       TEXT NOT NULL CHECK (length(version) = 64),
  definition    TEXT NOT NULL CHECK (json_valid(definition)),  -- canonical JSON, without `$schema`
  schedule      TEXT,              -- the ENTRY_POINT's cron string, if any (for the cron handler)
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (workspace, workflow_id, version)
);

-- The latest version of each workflow: the row a trigger starts on.
CREATE TABLE workflows (
  workspace       TEXT NOT NULL,
  workflow_id     TEXT NOT NULL,
  latest_version  TEXT NOT NULL,
  schedule        TEXT,
  updated_at      INTEGER NOT NULL,
  PRIMARY KEY (workspace, workflow_id),
  FOREIGN KEY (workspace, workflow_id, latest_version) REFERENCES workflow_versions (workspace, workflow_id, version)
);

CREATE INDEX workflows_scheduled ON workflows (schedule) WHERE schedule IS NOT NULL;
