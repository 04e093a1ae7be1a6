-- hookd schema v27 (PostgreSQL): the digests of endpoints' signing keys.
--
-- One row per key an endpoint holds (current and rotated-out): an HMAC-SHA256 of the key
-- under a key derived from the master key `key_id`, never the key. A key supplied for one
-- endpoint that another already holds is refused by looking its digest up; `shown_at` is
-- when the key was first shown by `GET …/secret`, for `--secrets-shown-once`. Rows of
-- existing endpoints are written at start, by the first hookd that runs this schema.
CREATE TABLE endpoint_key_digests (
    endpoint_id TEXT COLLATE "C" NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
    digest      TEXT COLLATE "C" NOT NULL,
    key_id      TEXT COLLATE "C" NOT NULL,
    shown_at    BIGINT,
    PRIMARY KEY (endpoint_id, digest)
);
CREATE INDEX endpoint_key_digests_by_digest ON endpoint_key_digests (digest);
