-- hookd schema v11 (SQLite): e-mail notices to customers.
--
-- The notices follow the operational events hookd already writes (messages of the operations
-- application, each in the transaction of the change it tells of). One row says how far they
-- have been sent and which process sends them: one process at a time, its turn ending at
-- `turn_until` unless renewed, so a dead process's turn passes to another.
CREATE TABLE notice_cursor (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    -- The last operational event done (sent, or skipped: no address, or rate-limited); NULL
    -- until the first turn, which starts at its own time (earlier events are never mailed).
    sent_up_to TEXT,
    owner      TEXT,
    turn_until INTEGER NOT NULL
);
INSERT INTO notice_cursor (id, sent_up_to, owner, turn_until) VALUES (1, NULL, NULL, 0);
