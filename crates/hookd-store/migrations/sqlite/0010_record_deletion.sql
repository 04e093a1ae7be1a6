-- hookd schema v10 (SQLite): records deleted after `--keep-records`.
--
-- Once a message's content is purged and its record's time has run out, the message and its
-- deliveries are deleted. Its `eventId` stays taken for its application for a while after
-- (`--keep-event-ids` from the message's creation): the small row below says so, and the
-- trigger refuses a new message that would take it, as the unique key on messages does for a
-- message still there.
CREATE TABLE spent_event_ids (
    app_id     TEXT NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    event_id   TEXT NOT NULL,
    -- The deleted message's creation: the `eventId` is released from it on.
    created_at INTEGER NOT NULL,
    PRIMARY KEY (app_id, event_id)
) WITHOUT ROWID;
CREATE INDEX spent_event_ids_by_age ON spent_event_ids (created_at);
CREATE TRIGGER messages_event_id_spent BEFORE INSERT ON messages
    WHEN NEW.event_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM spent_event_ids s WHERE s.app_id = NEW.app_id AND s.event_id = NEW.event_id)
BEGIN
    SELECT RAISE(ABORT, 'the eventId is spent');
END;
-- The records walk: purged messages only, oldest first.
CREATE INDEX messages_purged ON messages (id) WHERE purged_at IS NOT NULL;
