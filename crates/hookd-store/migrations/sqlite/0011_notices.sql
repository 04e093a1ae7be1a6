-- hookd schema v11 (SQLite): e-mail notices to customers.
--
-- The notices follow the operational events hookd already writes (messages of the operations
-- application, each in the transaction of the change it tells of). One row says how far they
-- have been sent and which process sends them: one process at a time, its turn ending at
-- `turn_until` unless renewed, so a dead process's turn passes to another.
CREATE TABLE notice_cursor (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    -- The last operational event done (sent, or skipped: no address, or rate-limited).
    sent_up_to TEXT NOT NULL,
    owner      TEXT,
    turn_until INTEGER NOT NULL
);
