-- hookd schema v13 (SQLite): a message's tags (a JSON array of strings, or NULL) and the time
-- its deliveries were scheduled for (`deliverAt`, unix milliseconds, NULL: at once).
ALTER TABLE messages ADD COLUMN tags TEXT;
ALTER TABLE messages ADD COLUMN deliver_at INTEGER;
