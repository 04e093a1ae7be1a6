-- hookd: foreign keys off
-- hookd schema v24 (SQLite): `messages` rebuilt, its `eventId` key holding only messages
-- that have an `eventId`.
--
-- The table's `UNIQUE (app_id, event_id)` kept an index entry for every message, though most
-- have no `eventId` (NULLs never clash): a B-tree write on every publish that checks nothing.
-- SQLite cannot drop a table's constraint, so the table is rebuilt (its twelve steps: the
-- first line above has the runner run this with foreign keys off, which a rename and a drop of
-- a parent table need, and check every foreign key before it commits) with a partial unique
-- index in its place. The payload moves last: SQLite reaches a column past a payload larger
-- than its page by reading the payload's overflow pages.
CREATE TABLE messages_v24 (
    id                 TEXT PRIMARY KEY,
    app_id             TEXT NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    event_type         TEXT NOT NULL,
    event_id           TEXT,
    channels           TEXT,
    created_at         INTEGER NOT NULL,
    payload_expires_at INTEGER,
    purged_at          INTEGER,
    ordering_key       TEXT,
    tags               TEXT,
    deliver_at         INTEGER,
    -- The exact bytes receivers get; NULL once expunged.
    payload            BLOB
);
INSERT INTO messages_v24 (id, app_id, event_type, event_id, channels, created_at,
        payload_expires_at, purged_at, ordering_key, tags, deliver_at, payload)
    SELECT id, app_id, event_type, event_id, channels, created_at, payload_expires_at,
        purged_at, ordering_key, tags, deliver_at, payload
    FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v24 RENAME TO messages;

-- A message's `eventId` is taken once in its application (a deleted message's stays taken a
-- while longer in `spent_event_ids`).
CREATE UNIQUE INDEX messages_by_event_id ON messages (app_id, event_id)
    WHERE event_id IS NOT NULL;
-- As before: an application's messages, and by event type (v5); the purge's walks (v6) and
-- the records walk (v10).
CREATE INDEX messages_by_app ON messages (app_id, id);
CREATE INDEX messages_by_app_event_type ON messages (app_id, event_type, id);
CREATE INDEX messages_retention_window ON messages (id)
    WHERE purged_at IS NULL AND payload_expires_at IS NULL;
CREATE INDEX messages_retention_expiry ON messages (payload_expires_at, id)
    WHERE purged_at IS NULL AND payload_expires_at IS NOT NULL;
CREATE INDEX messages_purged ON messages (id) WHERE purged_at IS NOT NULL;
