-- Shards (SPEC section 13, docs/shards.md): the placement fence. Shard 0 records the shard each
-- workspace was first used on. An isolate compares its WORKSPACE_SHARDS map with this record once
-- per var value; a workspace the map places elsewhere answers 503 until a move is recorded here,
-- so an edited map can never split one workspace's dedupe across two databases.
-- Every shard applies every migration (one schema everywhere); only shard 0's table is used.
CREATE TABLE workspace_placements (
  workspace TEXT PRIMARY KEY,
  shard INTEGER NOT NULL CHECK (shard >= 0),
  placed_at INTEGER NOT NULL
) WITHOUT ROWID;
