-- The identity sweep walks the claims by their key instead of an expiry index (issue 47 point 2,
-- docs/ledger.md "Rows written per execution"): one row written less per execution — the claim's
-- `execution_identities_expiry` entry, which only the sweep read.
--
-- The sweep (src/ledger/identity-sweep.ts) now reads the claims in key order from where its last
-- tick stopped, a bounded stretch per tick, and deletes the expired ones in that stretch; where it
-- stopped is the one row of `sweep_cursors` named 'identities' (written once per tick, not per
-- execution). The identity is a SHA-256 in hex, spread evenly over the key: every claim is looked at
-- once per walk. An expired claim is never read as live (the claim statement tests `expires_at`
-- itself, and takes an expired row over), so a claim deleted later than its expiry changes nothing
-- but the table's size: rows read, priced at 1/1000 of a row written, for rows written.
--
-- DROP INDEX reads no table; the new table is empty.
DROP INDEX IF EXISTS execution_identities_expiry;
CREATE TABLE sweep_cursors (
  -- Which walk: 'identities'.
  name        TEXT PRIMARY KEY,
  -- The last key the walk looked at; '' before the first key (a new walk).
  position    TEXT NOT NULL,
  -- When a walk last started over from the first key, and when the row was last written.
  walk_started_at INTEGER,
  updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
