-- hookd schema v22 (SQLite): ingest sources, the requests they accepted, and a bounded record
-- of the requests they refused.
--
-- A source receives a provider's webhooks at its token's URL and owns one application (whose
-- uid is `hookd-ingest-` and the source id): its endpoints are the forwarding targets, its
-- messages the accepted requests. Deleting the application deletes the source. The token is
-- found by its SHA-256; the token itself and the provider secrets are sealed in `sealed`.
-- `ordering_pointer`, a JSON pointer into the body, names the messages' ordering key.
CREATE TABLE ingest_sources (
    id                  TEXT PRIMARY KEY,
    uid                 TEXT UNIQUE,
    name                TEXT NOT NULL,
    kind                TEXT NOT NULL,
    sealed              TEXT NOT NULL,
    metadata            TEXT NOT NULL,
    app_id              TEXT NOT NULL UNIQUE REFERENCES applications(id) ON DELETE CASCADE,
    token_hash          TEXT NOT NULL UNIQUE,
    previous_token_hash TEXT,
    previous_until      INTEGER,
    max_body_bytes      INTEGER,
    rate_limit          INTEGER,
    ordering_pointer    TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX ingest_sources_by_previous_token ON ingest_sources (previous_token_hash)
    WHERE previous_token_hash IS NOT NULL;

-- The headers an accepted request carried (its body is its message's payload), written just
-- after the message and gone with it when retention deletes it.
CREATE TABLE ingest_requests (
    message_id  TEXT PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    source_id   TEXT NOT NULL REFERENCES ingest_sources(id) ON DELETE CASCADE,
    event_type  TEXT NOT NULL,
    event_id    TEXT,
    headers     TEXT NOT NULL,
    remote_addr TEXT,
    received_at INTEGER NOT NULL
);
CREATE INDEX ingest_requests_by_source ON ingest_requests (source_id, message_id);

-- Refused requests, the newest few per source: when, why, which header names; never the body.
CREATE TABLE ingest_rejections (
    id           TEXT PRIMARY KEY,
    source_id    TEXT NOT NULL REFERENCES ingest_sources(id) ON DELETE CASCADE,
    reason       TEXT NOT NULL,
    detail       TEXT NOT NULL,
    header_names TEXT NOT NULL,
    remote_addr  TEXT,
    received_at  INTEGER NOT NULL
);
CREATE INDEX ingest_rejections_by_source ON ingest_rejections (source_id, id);
