-- Key memory: hot and cold (SPEC section 20, docs/history.md "Key memory: hot and cold"). A kept
-- key send (`destination_key_sends`, guarded = 1) stays in D1 while its destination may still
-- remember the key; older ones move to the cold tier, one small R2 object per key (src/keys/cold.ts),
-- and leave this filter behind: a blocked Bloom filter (512-bit blocks, 7 bits per key, src/keys/filter.ts)
-- that the retention guard reads — one indexed query — before it asks R2 whether a key it does not
-- find hot was sent before. No table rebuild: three new tables.
--
--   key_filter       one row per touched block of a generation: the block's 512 bits as eight
--                    64-bit words (w0–w7). The move ORs bits in with one upsert per pass
--                    (`w0 = w0 | excluded.w0`); nothing ever clears a bit. Keyed (block, gen), so
--                    the guard's probe reads one block of every generation with one range.
--   key_filter_gens  the keys added to each generation: a generation holds `KEYS_PER_GENERATION`
--                    keys (its false-positive rate is stated at that fill), then the next begins.
--   key_move_cursor  where the move's scan of the due sends stands (one row, or none: the head), so
--                    sends still held by a kept execution are looked at once per cycle and never
--                    stall the move of those behind them.
CREATE TABLE key_filter (
  block  INTEGER NOT NULL CHECK (block >= 0),
  gen    INTEGER NOT NULL CHECK (gen >= 0),
  w0     INTEGER NOT NULL DEFAULT 0,
  w1     INTEGER NOT NULL DEFAULT 0,
  w2     INTEGER NOT NULL DEFAULT 0,
  w3     INTEGER NOT NULL DEFAULT 0,
  w4     INTEGER NOT NULL DEFAULT 0,
  w5     INTEGER NOT NULL DEFAULT 0,
  w6     INTEGER NOT NULL DEFAULT 0,
  w7     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (block, gen)
) WITHOUT ROWID;

CREATE TABLE key_filter_gens (
  gen   INTEGER PRIMARY KEY CHECK (gen >= 0),
  keys  INTEGER NOT NULL DEFAULT 0 CHECK (keys >= 0)
);

CREATE TABLE key_move_cursor (
  id               INTEGER PRIMARY KEY CHECK (id = 0),
  counted_from     INTEGER NOT NULL,
  workspace        TEXT NOT NULL,
  idempotency_key  TEXT NOT NULL,
  destination      TEXT NOT NULL
);
