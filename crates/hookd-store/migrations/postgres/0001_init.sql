-- hookd schema v1 (PostgreSQL). Times are unix milliseconds; JSON columns hold text (parsed by hookd, not the database).
-- Tables live in the `hookd` schema (the connection's search_path). Ids and event-type names are
-- COLLATE "C": ids sort by creation time only as bytes (base62 in ASCII order), which keyset
-- pagination relies on, and SQLite compares them the same way; a server whose default
-- collation is a language's (en_US.UTF-8) would otherwise interleave upper and lower case.
CREATE TABLE applications (
    id            TEXT COLLATE "C" PRIMARY KEY,
    uid           TEXT UNIQUE,
    name          TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    throttle_rate BIGINT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);

CREATE TABLE endpoints (
    id            TEXT COLLATE "C" PRIMARY KEY,
    app_id        TEXT COLLATE "C" NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    uid           TEXT,
    url           TEXT NOT NULL,
    description   TEXT NOT NULL,
    event_types   TEXT,
    channels      TEXT,
    disabled      BOOLEAN NOT NULL,
    throttle_rate BIGINT,
    metadata      TEXT NOT NULL,
    headers       TEXT NOT NULL,
    secret        TEXT NOT NULL,
    -- Why and when the endpoint was disabled, while it is.
    disabled_reason TEXT,
    disabled_at   BIGINT,
    -- Internal: when the current streak of failed attempts began (NULL after a success).
    failing_since BIGINT,
    timeout_secs  BIGINT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (app_id, uid)
);
CREATE INDEX endpoints_by_app ON endpoints (app_id, id);

CREATE TABLE event_types (
    name         TEXT COLLATE "C" PRIMARY KEY,
    description  TEXT NOT NULL,
    schemas      TEXT,
    archived     BOOLEAN NOT NULL,
    deprecated   BOOLEAN NOT NULL,
    feature_flag TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

-- payload: the exact bytes receivers get; NULL once expunged.
CREATE TABLE messages (
    id         TEXT COLLATE "C" PRIMARY KEY,
    app_id     TEXT COLLATE "C" NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    event_type TEXT NOT NULL,
    event_id   TEXT,
    channels   TEXT,
    payload    BYTEA,
    created_at BIGINT NOT NULL,
    UNIQUE (app_id, event_id)
);
CREATE INDEX messages_by_app ON messages (app_id, id);

-- One row per (message, endpoint) the message was routed to: the engine's work queue.
CREATE TABLE deliveries (
    message_id      TEXT COLLATE "C" NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    endpoint_id     TEXT COLLATE "C" NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    status          BIGINT NOT NULL,
    attempt_count   BIGINT NOT NULL,
    next_attempt_at BIGINT,
    updated_at      BIGINT NOT NULL,
    -- Whether the next attempt was asked for by hand (resend).
    manual          BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (message_id, endpoint_id)
);
-- The claim's probes: each endpoint's oldest due deliveries. Finished deliveries
-- (next_attempt_at NULL) are left out, so the index holds only the live queue.
CREATE INDEX deliveries_endpoint_due ON deliveries (endpoint_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, message_id);
-- recover (an endpoint's failed deliveries) and the endpoint's delivery log filtered by status.
CREATE INDEX deliveries_by_endpoint_status ON deliveries (endpoint_id, status, message_id);

CREATE TABLE attempts (
    id                   TEXT COLLATE "C" PRIMARY KEY,
    message_id           TEXT COLLATE "C" NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    endpoint_id          TEXT COLLATE "C" NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    response_status_code BIGINT NOT NULL,
    response             TEXT NOT NULL,
    response_head        TEXT NOT NULL,
    response_duration_ms BIGINT NOT NULL,
    status               BIGINT NOT NULL,
    trigger_type         BIGINT NOT NULL,
    created_at           BIGINT NOT NULL
);
CREATE INDEX attempts_by_message ON attempts (message_id, id);
CREATE INDEX attempts_by_endpoint ON attempts (endpoint_id, id);

CREATE TABLE api_tokens (
    id         TEXT COLLATE "C" PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    app_id     TEXT COLLATE "C" REFERENCES applications(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
);

CREATE TABLE idempotent_responses (
    key        TEXT PRIMARY KEY,
    status     BIGINT NOT NULL,
    body       BYTEA NOT NULL,
    expires_at BIGINT NOT NULL
);
