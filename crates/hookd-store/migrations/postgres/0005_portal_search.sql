-- The delivery log's search by event type: newest first within one application and event
-- type, a range scan even on a million messages (time bounds are id bounds, see search.rs).
CREATE INDEX messages_by_app_event_type ON messages (app_id, event_type, id);
