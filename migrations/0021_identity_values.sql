-- Search by business id (SPEC section 15, docs/ingress.md "Search by business id"):
-- `GET /v1/executions?identity=A-1001` and `?destinationKey=charge-A-1001`.
--
-- identity_values: one row per business value a trigger identity was built from — each
-- `idempotencyFields` value, or the `clientIdempotencyId` — of each execution a trigger started
-- (and of each start over of one: it carries the same trigger). Never the value itself: `value_hash`
-- is the hex SHA-256 of the RFC 8785 canonical JSON of ["identity-value", workspace, value], so the
-- value is normalised exactly as the identity normalises it (1001 and 1001.0 are one value, 1001 and
-- "1001" two) and the same value in two workspaces never shares a hash. A hash of an order id can
-- be found again by hashing candidate ids: still personal data, so erasure deletes these rows.
--
-- Written by ONE statement of the start batch, for the request that created the execution only
-- (src/ledger/executions.ts `recordIdentityValues`; a duplicate trigger writes nothing). No foreign
-- key: a row outlives its execution's removal by the history sweep, so the search still names the
-- removed execution from its tombstone; it goes when the tombstone goes (the trigger below), or at
-- once when the execution is erased (the removal batch, src/ledger/history.ts; an execution erased
-- after the sweep: src/ledger/search.ts `forgetIdentityValues`).
CREATE TABLE identity_values (
  workspace     TEXT NOT NULL,
  value_hash    TEXT NOT NULL CHECK (length(value_hash) = 64),
  execution_id  TEXT NOT NULL,
  PRIMARY KEY (workspace, value_hash, execution_id)
) WITHOUT ROWID;
-- By execution: erasure, the tombstone trigger and a start over's copy find an execution's rows.
CREATE INDEX identity_values_by_execution ON identity_values (execution_id);
-- A removed execution's values live as long as its tombstone, not longer (one statement, upper-case
-- BEGIN/END and no inner END: the shape wrangler's statement splitter keeps whole on a remote apply).
CREATE TRIGGER identity_values_expire AFTER DELETE ON execution_tombstones BEGIN DELETE FROM identity_values WHERE execution_id = old.id; END;

-- The executions whose steps sent a destination key: every step that persisted the key, whatever its
-- lineage or workflow (a start over, a reuse after failure, another trigger with the same business
-- data, a test run). Partial: a step writes an entry only when its key is persisted (one b-tree
-- insert in the statement that persists it, about 70 bytes); inserts and claims of steps never
-- touch it. After the history sweep the key's sends (`destination_key_sends`, kept for good when
-- guarded) still name the execution that sent it first.
CREATE INDEX steps_by_key ON steps (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL;
