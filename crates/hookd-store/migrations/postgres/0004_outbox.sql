-- hookd schema v4 (PostgreSQL): the transactional outbox (contract version 1, docs/outbox.md)
-- and what several hookd processes on one database need.
--
-- hookd.outbox is written by *applications*, inside their own transactions; hookd relays each
-- committed row once into a message and its deliveries, then deletes it. A row hookd cannot
-- relay keeps `error` (why) and `failed_at`, and is skipped until someone clears `error`.
-- Columns are a published contract: later versions only add columns with defaults.
CREATE TABLE outbox (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The application's id (app_…) or uid.
    app        TEXT NOT NULL,
    event_type TEXT NOT NULL,
    -- JSON (not JSONB): PostgreSQL keeps the text as written, and receivers get exactly it.
    payload    JSON NOT NULL,
    event_id   TEXT,
    channels   TEXT[],
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    error      TEXT,
    failed_at  TIMESTAMPTZ
);
COMMENT ON TABLE outbox IS 'hookd outbox, contract v1: INSERT (app, event_type, payload[, event_id, channels]) in your transaction; hookd relays committed rows once. See docs/outbox.md.';
-- The rows waiting for the relay, oldest first.
CREATE INDEX outbox_waiting ON outbox (id) WHERE error IS NULL;

-- Wakes the relays of every hookd process at commit (NOTIFY is transactional: a rolled-back
-- insert notifies nobody), so a producer needs no NOTIFY of its own.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookd_outbox', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_notify AFTER INSERT OR UPDATE OF error ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- Cluster-wide rate limits: the earliest time any process may start claiming an endpoint's
-- next window of attempts (unix ms; NULL: now).
ALTER TABLE endpoints ADD COLUMN next_window_at BIGINT;
-- Cluster-wide concurrency: each endpoint's deliveries in flight (leased) are counted at claim.
CREATE INDEX deliveries_in_flight ON deliveries (endpoint_id, next_attempt_at) WHERE status = 3;
