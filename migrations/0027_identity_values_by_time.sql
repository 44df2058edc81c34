-- Search by business id, a page at a time (issue 41; docs/ingress.md "Search by business id").
--
-- TABLE REBUILD: identity_values (its primary key gains `created_at`).
--
-- `GET /v1/executions?identity=A-1001` read every execution a value matched to serve one page: the
-- matches were found by (workspace, value_hash), then joined and sorted by creation time — 1,208
-- rows read for a page of one when 1,208 executions shared the value. The rows now carry their
-- execution's `created_at` inside the primary key, (workspace, value_hash, created_at,
-- execution_id), so a page walks the index newest first from its cursor and stops after the page:
-- rows read grow with the page, not with the executions the value matches. In the key, not a
-- second index: no row more written per value.
--
-- `created_at` is the execution's (the same for every value of it): the trigger on the execution's
-- insert writes it, a start over's copy (src/ledger/executions.ts `copyIdentityValues`) writes the
-- new execution's. The rows copied here take it from the execution, or from its tombstone when the
-- history sweep removed it; a row with neither names nothing the search could show and is dropped.
--
-- The two triggers that name the table are dropped first and made again after the rename (a
-- rename re-reads every trigger that names the table); each body is one statement without an inner
-- END (wrangler's remote splitter).
DROP TRIGGER executions_identity_values;
DROP TRIGGER identity_values_expire;

CREATE TABLE identity_values_new (
  workspace     TEXT NOT NULL,
  value_hash    TEXT NOT NULL CHECK (length(value_hash) = 64),
  created_at    INTEGER NOT NULL,
  execution_id  TEXT NOT NULL,
  PRIMARY KEY (workspace, value_hash, created_at, execution_id)
) WITHOUT ROWID;
INSERT INTO identity_values_new (workspace, value_hash, created_at, execution_id)
SELECT v.workspace, v.value_hash,
       coalesce((SELECT e.created_at FROM executions e WHERE e.id = v.execution_id),
                (SELECT t.created_at FROM execution_tombstones t WHERE t.id = v.execution_id)),
       v.execution_id
FROM identity_values v
WHERE EXISTS (SELECT 1 FROM executions e WHERE e.id = v.execution_id)
   OR EXISTS (SELECT 1 FROM execution_tombstones t WHERE t.id = v.execution_id);
DROP TABLE identity_values;
ALTER TABLE identity_values_new RENAME TO identity_values;
CREATE INDEX identity_values_by_execution ON identity_values (execution_id);

CREATE TRIGGER identity_values_expire AFTER DELETE ON execution_tombstones BEGIN DELETE FROM identity_values WHERE execution_id = old.id; END;

CREATE TRIGGER executions_identity_values AFTER INSERT ON executions WHEN NEW.identity IS NOT NULL BEGIN INSERT INTO identity_values (workspace, value_hash, created_at, execution_id) SELECT NEW.workspace, v.value, NEW.created_at, NEW.id FROM execution_identities i CROSS JOIN json_each(i.value_hashes) v WHERE i.identity = NEW.identity AND i.execution_id = NEW.id AND i.value_hashes IS NOT NULL ON CONFLICT DO NOTHING; END;
