-- hookd schema v1 (SQLite). Times are unix milliseconds; JSON columns hold text.
CREATE TABLE applications (
    id            TEXT PRIMARY KEY,
    uid           TEXT UNIQUE,
    name          TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    throttle_rate INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE endpoints (
    id            TEXT PRIMARY KEY,
    app_id        TEXT NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    uid           TEXT,
    url           TEXT NOT NULL,
    description   TEXT NOT NULL,
    event_types   TEXT,
    channels      TEXT,
    disabled      INTEGER NOT NULL,
    throttle_rate INTEGER,
    metadata      TEXT NOT NULL,
    headers       TEXT NOT NULL,
    secret        TEXT NOT NULL,
    -- Why and when the endpoint was disabled, while it is.
    disabled_reason TEXT,
    disabled_at   INTEGER,
    -- Internal: when the current streak of failed attempts began (NULL after a success).
    failing_since INTEGER,
    timeout_secs  INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (app_id, uid)
);
CREATE INDEX endpoints_by_app ON endpoints (app_id, id);

CREATE TABLE event_types (
    name         TEXT PRIMARY KEY,
    description  TEXT NOT NULL,
    schemas      TEXT,
    archived     INTEGER NOT NULL,
    deprecated   INTEGER NOT NULL,
    feature_flag TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

-- payload: the exact bytes receivers get; NULL once expunged.
CREATE TABLE messages (
    id         TEXT PRIMARY KEY,
    app_id     TEXT NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    event_type TEXT NOT NULL,
    event_id   TEXT,
    channels   TEXT,
    payload    BLOB,
    created_at INTEGER NOT NULL,
    UNIQUE (app_id, event_id)
);
CREATE INDEX messages_by_app ON messages (app_id, id);

-- One row per (message, endpoint) the message was routed to: the engine's work queue.
CREATE TABLE deliveries (
    message_id      TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    status          INTEGER NOT NULL,
    attempt_count   INTEGER NOT NULL,
    next_attempt_at INTEGER,
    updated_at      INTEGER NOT NULL,
    -- Whether the next attempt was asked for by hand (resend).
    manual          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (message_id, endpoint_id)
);
-- The claim's probes: each endpoint's oldest due deliveries. Finished deliveries
-- (next_attempt_at NULL) are left out, so the index holds only the live queue.
CREATE INDEX deliveries_endpoint_due ON deliveries (endpoint_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, message_id);
-- recover (an endpoint's failed deliveries) and the endpoint's delivery log filtered by status.
CREATE INDEX deliveries_by_endpoint_status ON deliveries (endpoint_id, status, message_id);

CREATE TABLE attempts (
    id                   TEXT PRIMARY KEY,
    message_id           TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    endpoint_id          TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    response_status_code INTEGER NOT NULL,
    response             TEXT NOT NULL,
    response_head        TEXT NOT NULL,
    response_duration_ms INTEGER NOT NULL,
    status               INTEGER NOT NULL,
    trigger_type         INTEGER NOT NULL,
    created_at           INTEGER NOT NULL
);
CREATE INDEX attempts_by_message ON attempts (message_id, id);
CREATE INDEX attempts_by_endpoint ON attempts (endpoint_id, id);

CREATE TABLE api_tokens (
    id         TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    app_id     TEXT REFERENCES applications(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER
);

CREATE TABLE idempotent_responses (
    key        TEXT PRIMARY KEY,
    status     INTEGER NOT NULL,
    body       BLOB NOT NULL,
    expires_at INTEGER NOT NULL
);
