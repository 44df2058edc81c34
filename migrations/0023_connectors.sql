-- Connectors (SPEC section 15, docs/connectors.md): a workspace's reusable destination — base URL,
-- headers (secret templates, never values), the key rule, retry and timeout defaults, the verify
-- probe for keyless APIs. Versioned like workflows: a version is the SHA-256 of the canonical
-- document and never changes; `connectors` points at the latest. A workflow that names a connector
-- is resolved against its latest version when the workflow is saved, and the resolved definition
-- is what is hashed and stored: editing a connector never changes a saved workflow version.
CREATE TABLE connector_versions (
  workspace   TEXT NOT NULL,
  name        TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  version     TEXT NOT NULL CHECK (length(version) = 64),
  definition  TEXT NOT NULL CHECK (length(CAST(definition AS BLOB)) <= 65536),
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (workspace, name, version)
);

CREATE TABLE connectors (
  workspace       TEXT NOT NULL,
  name            TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  latest_version  TEXT NOT NULL CHECK (length(latest_version) = 64),
  updated_at      INTEGER NOT NULL,
  PRIMARY KEY (workspace, name)
);
