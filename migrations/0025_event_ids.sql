-- Events get an id that is never given twice (issue 41, finding 3; docs/waits.md "Event ids").
-- REBUILDS two tables: `events` and `event_consumptions` (both small: events live EVENT_HISTORY,
-- 7 days; a consumption lives as long as its event). Nothing else is rebuilt.
--
-- Until now `events` was keyed (workspace, event_key) with an implicit rowid, and
-- `event_consumptions.event_rowid` named that rowid. SQLite gives a deleted row's rowid to the next
-- insert, so a consumption that outlived its event (an erasure deleted a broadcast another
-- execution had also taken) pointed at the next event on the shard — any workspace's — which was
-- then born "taken". Now:
-- - `events.id` is INTEGER PRIMARY KEY AUTOINCREMENT: the rowid, never reused (sqlite_sequence keeps
--   the highest ever given). (workspace, event_key) stays UNIQUE: it is the dedupe key.
-- - `event_consumptions.event_rowid` references `events(id)` ON DELETE CASCADE: a consumption never
--   outlives its event. It also carries the event's `workspace`, so every statement that reads
--   consumptions by event is scoped to the workspace too.
-- - `events.erased_at`: an erasure of the only executions that took an event keeps a payload-free
--   dedupe record (data and correlation value blanked) so a provider's retry stays a duplicate.
--
-- Data is kept: every event keeps its rowid as its id. A consumption whose event is gone (the
-- erasure bug) or whose event is not the one it was written for (received after the consumption,
-- or another workspace, name or value than its wait's) is dropped: it could only mark the wrong
-- event taken, and dropping it lets its wait, if still open, take a new event.
ALTER TABLE events RENAME TO events_0024;
ALTER TABLE event_consumptions RENAME TO event_consumptions_0024;

CREATE TABLE events (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  workspace        TEXT NOT NULL,
  event_key        TEXT NOT NULL CHECK (length(event_key) BETWEEN 1 AND 400),
  event_id         TEXT NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
  name             TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  match_hash       TEXT NOT NULL CHECK (length(match_hash) = 64),
  match_value      TEXT NOT NULL CHECK (length(CAST(match_value AS BLOB)) <= 1024),
  data             TEXT CHECK (data IS NULL OR length(CAST(data AS BLOB)) <= 262144),
  source           TEXT CHECK (source IS NULL OR length(source) <= 64),
  received_at      INTEGER NOT NULL,
  buffered_until   INTEGER NOT NULL CHECK (buffered_until >= received_at),
  nonce            TEXT NOT NULL,
  consumed_at      INTEGER,
  duplicates       INTEGER NOT NULL DEFAULT 0 CHECK (duplicates >= 0),
  last_duplicate_at INTEGER,
  erased_at        INTEGER,
  UNIQUE (workspace, event_key)
);
INSERT INTO events (id, workspace, event_key, event_id, name, match_hash, match_value, data, source, received_at, buffered_until,
                    nonce, consumed_at, duplicates, last_duplicate_at, erased_at)
SELECT rowid, workspace, event_key, event_id, name, match_hash, match_value, data, source, received_at, buffered_until,
       nonce, consumed_at, duplicates, last_duplicate_at, NULL
FROM events_0024;

CREATE TABLE event_consumptions (
  wait_key         TEXT PRIMARY KEY,
  event_rowid      INTEGER NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  workspace        TEXT NOT NULL,
  execution_id     TEXT NOT NULL,
  vertex_id        TEXT NOT NULL,
  consumed_at      INTEGER NOT NULL
);
INSERT INTO event_consumptions (wait_key, event_rowid, workspace, execution_id, vertex_id, consumed_at)
SELECT c.wait_key, c.event_rowid, e.workspace, c.execution_id, c.vertex_id, c.consumed_at
FROM event_consumptions_0024 c JOIN events e ON e.id = c.event_rowid
WHERE c.consumed_at >= e.received_at
  AND NOT EXISTS (SELECT 1 FROM event_waits w WHERE w.wait_key = c.wait_key
                    AND (w.workspace <> e.workspace OR w.name <> e.name OR w.match_hash <> e.match_hash));

DROP TABLE event_consumptions_0024;
DROP TABLE events_0024;

-- An event taken by a consumption that was dropped, and by no other, is untaken again only if its
-- buffer is still open: it goes to the next wait that starts within it, as it should have.
UPDATE events SET consumed_at = NULL
WHERE consumed_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM event_consumptions c WHERE c.event_rowid = events.id);

CREATE INDEX events_match ON events (workspace, name, match_hash, received_at);
CREATE INDEX events_received ON events (received_at);
CREATE INDEX event_consumptions_event ON event_consumptions (event_rowid);
CREATE INDEX event_consumptions_execution ON event_consumptions (execution_id);
