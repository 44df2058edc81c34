-- The payments API's outgoing webhooks (demo/src/confirmations.ts): a charge made with
-- `confirmWebhook: true` is confirmed asynchronously by a Standard-Webhooks-signed
-- `charge.succeeded` to the engine's event source, delivered twice with one `webhook-id`, as a
-- provider that retries would. One row per delivery, with what the engine answered.
CREATE TABLE webhook_deliveries (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  webhook_id       TEXT NOT NULL,      -- the `webhook-id` header: the same on both deliveries
  charge_id        TEXT NOT NULL,
  order_id         TEXT,
  attempt          INTEGER NOT NULL,   -- 1, then 2 for the repeat
  url              TEXT NOT NULL,
  status           INTEGER,            -- the engine's HTTP status; NULL when the request failed
  answer           TEXT,               -- the engine's answer (at most 2,000 characters), or the error
  sent_at          INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_by_order ON webhook_deliveries (order_id);
