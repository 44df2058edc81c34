-- Waits, part two (SPEC section 14, docs/waits.md): WAIT_FOR_EVENT, events and event sources.
-- New tables only: no rebuild of `steps`, `executions` or `step_attempts` (a wait parks its step
-- exactly as a DELAY does, migration 0019; the attempt that parked it ends as 'slept').
--
-- events: one row per distinct event of a workspace. `event_key` is 'id:' || the sender's id, or
-- 'content:' || SHA-256 of (name, correlation, data) — a content key is retired (renamed with its
-- receive time) once it is older than the dedupe window, so two identical events a window apart
-- are two events. `match_hash` is SHA-256 of the canonical JSON of the correlation value (the
-- trigger identity's rule: 1001 and 1001.0 meet, 1001 and "1001" do not). `nonce` names the
-- delivery that inserted the row: the later statements of that delivery's batch act only when the
-- nonce is theirs, so a duplicate delivery changes nothing but `duplicates`. `consumed_at` is set
-- once a wait took the event; a buffered event is one with `consumed_at IS NULL` and
-- `buffered_until` ahead.
CREATE TABLE events (
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
  PRIMARY KEY (workspace, event_key)
);
-- One index serves the buffer (a wait's take: unconsumed, oldest first) and the trace's "events that arrived
-- for this wait" (every event on the wait's name and correlation value).
CREATE INDEX events_match ON events (workspace, name, match_hash, received_at);
CREATE INDEX events_received ON events (received_at);

-- event_waits: the wait a WAIT_FOR_EVENT step registered, one per (execution, vertex). `retry_base`
-- is the step's (an operator retry moves it): `wait_key` = execution/vertex/retry_base names ONE
-- registration, so a retried wait waits for a new event and never takes its old one again.
-- `timed_out` is set by the wait's own claim once its timeout passed with no event: an event batch
-- never takes a timed-out wait, and a wait never times out once an event took it — whichever
-- commits first is the one outcome.
CREATE TABLE event_waits (
  execution_id     TEXT NOT NULL,
  vertex_id        TEXT NOT NULL,
  wait_key         TEXT NOT NULL,
  retry_base       INTEGER NOT NULL,
  workspace        TEXT NOT NULL,
  name             TEXT NOT NULL,
  match_hash       TEXT NOT NULL CHECK (length(match_hash) = 64),
  match_value      TEXT NOT NULL CHECK (length(CAST(match_value AS BLOB)) <= 1024),
  consume          TEXT NOT NULL CHECK (consume IN ('one', 'all')),
  registered_at    INTEGER NOT NULL,
  timeout_at       INTEGER NOT NULL,
  timed_out        INTEGER NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1)),
  PRIMARY KEY (execution_id, vertex_id)
);
CREATE INDEX event_waits_match ON event_waits (workspace, name, match_hash, registered_at);
CREATE UNIQUE INDEX event_waits_key ON event_waits (wait_key);

-- event_consumptions: which wait took which event (a wait takes at most one: `wait_key` is
-- unique; a `consume: "one"` event goes to one wait, a broadcast to every `all` wait registered
-- when it arrived). The wait's claim reads its event from here. `event_rowid` is the event's rowid
-- (stable when a content key is retired; the sweep deletes an event with its consumptions).
CREATE TABLE event_consumptions (
  wait_key         TEXT PRIMARY KEY,
  event_rowid      INTEGER NOT NULL,
  execution_id     TEXT NOT NULL,
  vertex_id        TEXT NOT NULL,
  consumed_at      INTEGER NOT NULL
);
CREATE INDEX event_consumptions_event ON event_consumptions (event_rowid);
CREATE INDEX event_consumptions_execution ON event_consumptions (execution_id);

-- event_sources: how a provider's webhook becomes an event (POST /events/{workspace}/{source}):
-- the verification scheme, a secret template (never a secret's value) and the expressions that
-- extract id, name and correlation value. `version` is SHA-256 of the canonical definition.
CREATE TABLE event_sources (
  workspace        TEXT NOT NULL,
  name             TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  definition       TEXT NOT NULL CHECK (length(CAST(definition AS BLOB)) <= 65536),
  version          TEXT NOT NULL CHECK (length(version) = 64),
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  PRIMARY KEY (workspace, name)
);
