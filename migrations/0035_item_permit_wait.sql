-- Flow control per destination (SPEC section 17, docs/connectors.md "Limits"): a MAP's item that
-- waits for a connector's permit shows its wait in the trace as a step does (steps.permit_wait,
-- migration 0029). No table rebuild: one added column of `work_items`.
--
--   work_items.permit_wait  the item's permit wait for the trace: JSON { connector, since, until,
--                           reason, grantedAt } (NULL if it never waited).
ALTER TABLE work_items ADD COLUMN permit_wait TEXT CHECK (permit_wait IS NULL OR length(permit_wait) <= 2000);
