-- The refunds API (demo/src/refunds.ts): a refund per order line, keyed by an Idempotency-Key
-- header (`refund-<order>-<sku>` through connectors/demo-refunds.json). Every call is recorded in
-- `refund_calls`, whatever the answer, so a key sent twice — a retry, or two different lines under
-- one key, the double a MAP's key rules refuse at save — is visible per key; `refunds` holds the
-- effect, one per key (the UNIQUE key is the guard: a repeat answers the refund already made).
CREATE TABLE refunds (
  id               TEXT PRIMARY KEY,
  idempotency_key  TEXT NOT NULL UNIQUE,
  order_id         TEXT,
  sku              TEXT,
  amount           REAL,
  request          TEXT NOT NULL,      -- the canonical JSON of the first request's body
  created_at       INTEGER NOT NULL
);
CREATE INDEX refunds_by_order ON refunds (order_id, created_at);
CREATE TABLE refund_calls (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  idempotency_key  TEXT NOT NULL,
  order_id         TEXT,
  sku              TEXT,
  request          TEXT NOT NULL,      -- this call's body, canonical JSON
  outcome          TEXT NOT NULL CHECK (outcome IN ('created', 'replayed', 'conflict')),
  refund_id        TEXT NOT NULL,
  created_at       INTEGER NOT NULL
);
CREATE INDEX refund_calls_by_key ON refund_calls (idempotency_key, id);
CREATE INDEX refund_calls_by_order ON refund_calls (order_id, id);
