-- The HTTP Idempotency-Key ledger (SPEC section 6). Owned by src/ledger/idempotency-keys.ts:
-- every write to this table is one of the named statements there.
-- Times are integer milliseconds since the Unix epoch; the clock is always a statement parameter.

CREATE TABLE idempotency_keys (
  -- Scope: the server-derived principal (e.g. the workspace) plus the client's key.
  principal        TEXT NOT NULL CHECK (length(principal) BETWEEN 1 AND 512),
  idem_key         TEXT NOT NULL CHECK (length(idem_key) BETWEEN 1 AND 255),
  -- SHA-256 (hex) of method, path+query, allowlisted headers and the raw body bytes.
  fingerprint      TEXT NOT NULL CHECK (length(fingerprint) = 64),
  status           TEXT NOT NULL CHECK (status IN ('pending', 'completed')),
  -- The fencing token: +1 on every takeover. Settle and release name the generation they own.
  generation       INTEGER NOT NULL DEFAULT 1 CHECK (generation >= 1),
  -- Random per claim. Lets the single claim-or-load statement tell its caller "this row is
  -- yours" (concurrent requests share one frozen Workers clock, so a timestamp cannot), and
  -- closes the ABA case where a row is swept and re-created with generation 1 again.
  claim_token      TEXT NOT NULL,
  created_at       INTEGER NOT NULL,
  claimed_at       INTEGER NOT NULL,            -- when the current generation claimed the row
  lease_until      INTEGER,                     -- pending: after this, a retry may take over
  completed_at     INTEGER,
  -- Retention: the row answers (replays, 409s, 422s) until this instant, then it is dead and
  -- may be swept or re-claimed. Written from the middleware's one `retentionMs` setting.
  expires_at       INTEGER NOT NULL,
  response_status  INTEGER CHECK (response_status BETWEEN 100 AND 599),
  response_headers TEXT,                        -- JSON object of the allowlisted headers
  response_body    BLOB,                        -- raw bytes, bounded by the middleware
  PRIMARY KEY (principal, idem_key),
  -- A pending row has a lease and no response; a completed row has a response status, a
  -- completion time and no lease.
  CHECK ((status = 'pending') = (lease_until IS NOT NULL)),
  CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
  CHECK ((status = 'completed') = (response_status IS NOT NULL)),
  CHECK (status = 'completed' OR (response_headers IS NULL AND response_body IS NULL)),
  CHECK (expires_at >= claimed_at)
);

-- The retention sweep walks rows oldest-expiry first, a bounded batch at a time.
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
