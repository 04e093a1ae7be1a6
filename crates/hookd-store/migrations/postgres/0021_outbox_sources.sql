-- hookd schema v21 (PostgreSQL): the outbox rows relayed from producers' own databases
-- (outbox sources, docs/outbox.md). A row is published under its source's name and its id
-- there, in the transaction that writes its message: a relay that crashed before removing the
-- row from the producer's table finds it here and only removes it. Goes with its message.
CREATE TABLE outbox_relayed (
    source     TEXT NOT NULL,
    row_id     BIGINT NOT NULL,
    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (source, row_id)
);
CREATE INDEX outbox_relayed_message ON outbox_relayed (message_id);
