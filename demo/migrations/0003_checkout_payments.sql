-- The checkout API (demo/src/checkout.ts) takes its idempotency key from the JSON body, like
-- Square's `idempotency_key`, and remembers it itself: the UNIQUE constraint IS its guard (a
-- repeated key finds the payment instead of making another), so a key that is not re-sent
-- verbatim shows up as two rows in `GET /checkout/payments`.
CREATE TABLE checkout_payments (
  id               TEXT PRIMARY KEY,
  idempotency_key  TEXT NOT NULL UNIQUE,
  order_id         TEXT,
  amount           REAL,
  request          TEXT NOT NULL,      -- the request body without the key, as JSON text
  created_at       INTEGER NOT NULL
);
