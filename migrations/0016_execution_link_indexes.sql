-- The links of reuse after failure (migration 0011) looked up from the other end.
--
-- `previous_execution_id` and `superseded_by` reference executions(id) with no index, so finding
-- the execution that follows or superseded a given one — and the foreign-key check of deleting an
-- execution, which looks for rows still pointing at it — scans every execution. Issue 27's history
-- sweep deletes executions; it needs these lookups by index, as `started_over_from` has one
-- (migration 0009). Partial: most executions have neither link.
CREATE INDEX executions_by_previous ON executions (previous_execution_id) WHERE previous_execution_id IS NOT NULL;
CREATE INDEX executions_by_superseder ON executions (superseded_by) WHERE superseded_by IS NOT NULL;
