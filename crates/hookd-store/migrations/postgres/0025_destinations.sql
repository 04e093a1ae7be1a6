-- hookd schema v25 (PostgreSQL): destinations beyond HTTP, polling consumers' positions,
-- and poller tokens.
--
-- An endpoint gets a kind (`http`, the endpoint routes' only one; `fifo`, `polling`,
-- `rabbitMq`, `sqs`, `sns`, `amazonS3`, `natsJetStream`, `kafka` through the destination
-- routes), the non-secret configuration of its kind as JSON (credentials are sealed in
-- `secret` with the keys), and how it batches.
ALTER TABLE endpoints ADD COLUMN kind TEXT NOT NULL DEFAULT 'http';
ALTER TABLE endpoints ADD COLUMN config TEXT;
ALTER TABLE endpoints ADD COLUMN batch_size BIGINT NOT NULL DEFAULT 1;
ALTER TABLE endpoints ADD COLUMN max_wait_secs BIGINT NOT NULL DEFAULT 0;

-- Where each named consumer of a polling destination reads next: the iterator it was last
-- answered with.
CREATE TABLE poller_consumers (
    endpoint_id TEXT COLLATE "C" NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    consumer_id TEXT COLLATE "C" NOT NULL,
    position    TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, consumer_id)
);

-- A poller token: it reads this polling destination's messages and nothing else.
ALTER TABLE api_tokens ADD COLUMN endpoint_id TEXT COLLATE "C" REFERENCES endpoints(id) ON DELETE CASCADE;
CREATE INDEX api_tokens_by_endpoint ON api_tokens (endpoint_id) WHERE endpoint_id IS NOT NULL;
