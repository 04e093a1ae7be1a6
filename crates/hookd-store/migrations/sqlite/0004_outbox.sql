-- hookd schema v4 (SQLite): the transactional outbox (contract version 1, docs/outbox.md).
--
-- outbox is written by applications sharing this database file (or embedding hookd), inside
-- their own transactions; hookd relays each committed row once into a message and its
-- deliveries, then deletes it. A row hookd cannot relay keeps `error` (why) and `failed_at`,
-- and is skipped until someone clears `error`.
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    -- The application's id (app_…) or uid.
    app        TEXT NOT NULL,
    event_type TEXT NOT NULL,
    -- JSON text, sent to receivers exactly as written.
    payload    TEXT NOT NULL,
    event_id   TEXT,
    -- A JSON array of channel names, or NULL.
    channels   TEXT,
    -- Unix milliseconds.
    created_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    error      TEXT,
    failed_at  INTEGER
);
-- The rows waiting for the relay, oldest first.
CREATE INDEX outbox_waiting ON outbox (id) WHERE error IS NULL;
