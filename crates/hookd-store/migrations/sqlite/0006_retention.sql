-- hookd schema v6 (SQLite): retention.
--
-- A message's content (its payload and its attempts) is purged once every delivery of it is
-- settled and its retention has run out: its own `payload_expires_at` (from the message's
-- `payloadRetentionPeriod`) or, without one, the server's `--retention` window after
-- `created_at`. The purge sets `payload` NULL, deletes the attempts and stamps `purged_at`;
-- the message and delivery rows stay (the record that it happened and where it went).
ALTER TABLE messages ADD COLUMN payload_expires_at INTEGER;
ALTER TABLE messages ADD COLUMN purged_at INTEGER;
-- The purge's two walks, over messages not purged yet only: those on the server's window
-- oldest first (ids sort by creation time), those with their own expiry soonest first.
CREATE INDEX messages_retention_window ON messages (id)
    WHERE purged_at IS NULL AND payload_expires_at IS NULL;
CREATE INDEX messages_retention_expiry ON messages (payload_expires_at, id)
    WHERE purged_at IS NULL AND payload_expires_at IS NOT NULL;
