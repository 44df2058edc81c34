-- The hourly rollup counts the compensation statuses apart (docs/history.md "The hourly rollup",
-- docs/steps.md "Compensation"). Until now a rolled hour had four status columns and counted
-- COMPENSATING in `running`, COMPENSATED and COMPENSATION_FAILED in `failed`, so the status chart
-- kept them apart only in the hours it computes live. No table rebuild: three ADD COLUMNs.
--
--   stats_hourly.compensating         executions of the hour COMPENSATING when the roll found them
--   stats_hourly.compensated          … COMPENSATED
--   stats_hourly.compensation_failed  … COMPENSATION_FAILED
--
-- From this migration on, `running` and `failed` no longer include them: the seven status columns
-- add up to `executions`. A row rolled before it keeps its old counting (the three read 0, the
-- executions they counted stay in running/failed) until a later pass re-rolls its hour.
ALTER TABLE stats_hourly ADD COLUMN compensating INTEGER NOT NULL DEFAULT 0 CHECK (compensating >= 0);
ALTER TABLE stats_hourly ADD COLUMN compensated INTEGER NOT NULL DEFAULT 0 CHECK (compensated >= 0);
ALTER TABLE stats_hourly ADD COLUMN compensation_failed INTEGER NOT NULL DEFAULT 0 CHECK (compensation_failed >= 0);
