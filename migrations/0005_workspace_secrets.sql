-- Workspace secrets (SPEC section 3, "Secrets are scoped per workspace"). Values are encrypted
-- with AES-256-GCM under a key derived from the Worker secret SECRETS_MASTER_KEY; the plaintext is
-- never stored. The AAD binds (workspace, name), so a ciphertext copied to another row does not
-- decrypt. Written by PUT /v1/secrets/{name}; never returned.

CREATE TABLE workspace_secrets (
  workspace   TEXT NOT NULL,
  name        TEXT NOT NULL,
  key_id      TEXT NOT NULL,   -- which master key sealed it (src/secrets/crypto.ts keyIdOf)
  iv          TEXT NOT NULL,   -- base64 of the random 96-bit IV of this write
  ciphertext  TEXT NOT NULL,   -- base64 of AES-GCM ciphertext || 128-bit tag
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (workspace, name)
);
