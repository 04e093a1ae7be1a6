-- hookd schema v17 (PostgreSQL): records deleted after `--keep-records`.
--
-- Once a message's content is purged and its record's time has run out, the message and its
-- deliveries are deleted. Its `eventId` stays taken for its application for a while after
-- (`--keep-event-ids` from the message's creation): the small row below says so, and the
-- trigger `messages_event_id_spent` (with its function, in `postgres-functions/`) refuses a new
-- message that would take it, as the unique key on messages does for a message still there.
CREATE TABLE spent_event_ids (
    app_id     TEXT COLLATE "C" NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    event_id   TEXT NOT NULL,
    -- The deleted message's creation: the `eventId` is released from it on.
    created_at BIGINT NOT NULL,
    PRIMARY KEY (app_id, event_id)
);
CREATE INDEX spent_event_ids_by_age ON spent_event_ids (created_at);
-- The records walk: purged messages only, oldest first.
CREATE INDEX messages_purged ON messages (id) WHERE purged_at IS NOT NULL;
