-- Tables of the demo destinations (demo/src). Times are integer milliseconds since the Unix epoch.
-- 0001 (the Idempotency-Key ledger) is a copy of the engine's migration, kept identical by a test:
-- payments and shipping sit behind the same middleware users copy into their own Workers.

-- What the payments API charged. Deliberately NO unique constraint on idempotency_key: the ledger
-- middleware is the only guard, so a guard that fails shows up as two rows in
-- `GET /payments/charges` instead of being hidden by a second one.
CREATE TABLE charges (
  id               TEXT PRIMARY KEY,
  idempotency_key  TEXT NOT NULL,
  order_id         TEXT,
  amount           REAL,
  request          TEXT NOT NULL,      -- the request body as JSON text
  created_at       INTEGER NOT NULL
);
CREATE INDEX charges_by_key ON charges (idempotency_key);

-- What the shipping API labelled. Same reasoning: no unique key, the ledger is the guard.
CREATE TABLE labels (
  id               TEXT PRIMARY KEY,
  idempotency_key  TEXT NOT NULL,
  order_id         TEXT,
  request          TEXT NOT NULL,
  created_at       INTEGER NOT NULL
);
CREATE INDEX labels_by_key ON labels (idempotency_key);

-- The legacy API has no Idempotency-Key support; its only protection is a natural unique key.
-- A second POST with the same external_id answers 409, which read-verify-write workflows treat as
-- "already processed".
CREATE TABLE legacy_orders (
  id           TEXT PRIMARY KEY,
  external_id  TEXT NOT NULL UNIQUE,
  request      TEXT NOT NULL,
  created_at   INTEGER NOT NULL
);

-- Injected faults (`POST /faults`). Kept in D1, never in isolate memory: wrangler dev may run
-- several isolates, and a fault must fire exactly `count` times whichever one serves the request.
-- Each firing is one `UPDATE … WHERE remaining > 0 RETURNING`, so concurrent requests never
-- consume the same unit twice.
CREATE TABLE faults (
  id          INTEGER PRIMARY KEY,
  method      TEXT NOT NULL,
  path        TEXT NOT NULL,
  mode        TEXT NOT NULL CHECK (mode IN ('after-commit')),
  remaining   INTEGER NOT NULL CHECK (remaining >= 0),
  fired       INTEGER NOT NULL DEFAULT 0 CHECK (fired >= 0),
  created_at  INTEGER NOT NULL
);
CREATE INDEX faults_armed ON faults (method, path, id) WHERE remaining > 0;
