-- MAP items (SPEC section 16, docs/steps.md "MAP"): claimable work that is not a vertex. No table is
-- rebuilt: one new table and its indexes.
--
-- `work_items` is the general claimable non-vertex row: a MAP's items today (`kind` 'map_item'),
-- the compensation's undo steps later (another kind, same statements). Its columns are the step
-- row's (migrations/0004, 0006, 0019) under the same CHECKs, so the ledger's claim, fence and
-- settle statements run over it with the row source swapped (`work_items`/`row_key` for
-- `steps`/`vertex_id`: src/ledger/work-rows.ts).
--
-- `row_key` names the row wherever a step's vertex id goes in the tables keyed by step
-- (`step_attempts`, `step_events`, `destination_key_sends`): `<vertex>#<index>` for a map item,
-- `<vertex>#<kind>#<index>` for another kind. `#` is outside the vertex-id alphabet, so a row key
-- never equals a vertex id.
--
-- States: PENDING (persisted, not started: waiting for a slot of the MAP's concurrency) →
-- DISPATCHED → EXECUTING → COMPLETED | FAILED; CANCELLED from any unsettled state. Times are
-- integer milliseconds; the clock is a statement parameter.
CREATE TABLE work_items (
  execution_id     TEXT NOT NULL,
  row_key          TEXT NOT NULL CHECK (length(row_key) BETWEEN 3 AND 100 AND instr(row_key, '#') > 1),
  vertex_id        TEXT NOT NULL,
  kind             TEXT NOT NULL CHECK (kind IN ('map_item')),
  item_index       INTEGER NOT NULL CHECK (item_index BETWEEN 0 AND 999),
  workspace        TEXT NOT NULL,
  state            TEXT NOT NULL CHECK (state IN ('PENDING', 'DISPATCHED', 'EXECUTING', 'COMPLETED', 'FAILED', 'CANCELLED')),
  epoch            INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  retry_base       INTEGER NOT NULL DEFAULT 0 CHECK (retry_base >= 0 AND retry_base <= attempt),
  available_at     INTEGER NOT NULL,
  lease_until      INTEGER,
  next_resend_at   INTEGER,
  -- Never set for a map item (an item does not park); here so the step's claim statements, which
  -- clear and test it, run over this table unchanged.
  parked_until     INTEGER,
  resends          INTEGER NOT NULL DEFAULT 0 CHECK (resends >= 0),
  -- The list element (JSON), persisted once at the MAP's first claim: never re-evaluated.
  item             TEXT NOT NULL,
  idempotency_key  TEXT CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
  request          TEXT,
  output           TEXT,
  -- What the item passes on to the MAP's output (`collect`, at most maxCollectBytes ≤ 16 KiB).
  collected        TEXT CHECK (collected IS NULL OR length(CAST(collected AS BLOB)) <= 16384),
  error            TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  PRIMARY KEY (execution_id, row_key),
  UNIQUE (execution_id, vertex_id, kind, item_index),
  CHECK ((state = 'EXECUTING') = (lease_until IS NOT NULL)),
  CHECK ((state IN ('COMPLETED', 'FAILED', 'CANCELLED')) = (finished_at IS NOT NULL)),
  CHECK (state <> 'EXECUTING' OR epoch >= 1),
  CHECK ((state = 'COMPLETED') = (collected IS NOT NULL))
);

-- A MAP's items by state (the slots in use, the next PENDING item, a FAILED one, the counts): an
-- index range of one MAP, never a scan of its items.
CREATE INDEX work_items_by_state ON work_items (execution_id, vertex_id, kind, state, item_index);

-- The reaper's sweeps, the twins of the steps' (migrations/0009): expired leases, overdue messages.
CREATE INDEX work_items_lease_expiry ON work_items (lease_until) WHERE state = 'EXECUTING';
CREATE INDEX work_items_first_resend_due ON work_items (available_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NULL;
CREATE INDEX work_items_next_resend_due ON work_items (next_resend_at) WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL;

-- The search by destination key (src/ledger/search.ts), as `steps_by_key` (migrations/0021).
CREATE INDEX work_items_by_key ON work_items (workspace, idempotency_key) WHERE idempotency_key IS NOT NULL;
