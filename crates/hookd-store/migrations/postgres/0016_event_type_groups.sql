-- hookd schema v16 (PostgreSQL): an event type's group and feature flags (Svix's `groupName`
-- and `featureFlags`), kept and shown as given.
ALTER TABLE event_types ADD COLUMN group_name TEXT;
-- A JSON array of strings, or NULL.
ALTER TABLE event_types ADD COLUMN feature_flags TEXT;
