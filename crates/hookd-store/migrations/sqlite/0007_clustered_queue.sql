-- hookd schema v7 (SQLite): deliveries and attempts kept in their primary key's B-tree.
--
-- Every delivery is written three times (published, claimed or handed over, recorded) and
-- every attempt once, and each write touched a rowid table and its primary-key index apart.
-- As WITHOUT ROWID tables the row lives in the primary key itself: one B-tree fewer per
-- insert, one lookup fewer per update, and fewer pages for each commit to write. Attempts are
-- keyed by (message_id, id), which also serves every lookup of an attempt (always with its
-- message) and the message's attempt list, so `attempts_by_message` goes.
CREATE TABLE deliveries_v7 (
    message_id      TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    endpoint_id     TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    status          INTEGER NOT NULL,
    attempt_count   INTEGER NOT NULL,
    next_attempt_at INTEGER,
    updated_at      INTEGER NOT NULL,
    -- Whether the next attempt was asked for by hand (resend).
    manual          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (message_id, endpoint_id)
) WITHOUT ROWID;
INSERT INTO deliveries_v7 (message_id, endpoint_id, status, attempt_count, next_attempt_at,
        updated_at, manual)
    SELECT message_id, endpoint_id, status, attempt_count, next_attempt_at, updated_at, manual
    FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_v7 RENAME TO deliveries;
-- As in v1: the claim's probes (the live queue only), an endpoint's deliveries, and recover
-- and the delivery log by status.
CREATE INDEX deliveries_endpoint_due ON deliveries (endpoint_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, message_id);
CREATE INDEX deliveries_by_endpoint_status ON deliveries (endpoint_id, status, message_id);

CREATE TABLE attempts_v7 (
    id                   TEXT NOT NULL,
    message_id           TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    endpoint_id          TEXT NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    response_status_code INTEGER NOT NULL,
    response             TEXT NOT NULL,
    response_head        TEXT NOT NULL,
    response_duration_ms INTEGER NOT NULL,
    status               INTEGER NOT NULL,
    trigger_type         INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    PRIMARY KEY (message_id, id)
) WITHOUT ROWID;
INSERT INTO attempts_v7 (id, message_id, endpoint_id, url, response_status_code, response,
        response_head, response_duration_ms, status, trigger_type, created_at)
    SELECT id, message_id, endpoint_id, url, response_status_code, response, response_head,
        response_duration_ms, status, trigger_type, created_at
    FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_v7 RENAME TO attempts;
CREATE INDEX attempts_by_endpoint ON attempts (endpoint_id, id);
