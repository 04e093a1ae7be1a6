-- hookd schema v13 (PostgreSQL): an endpoint's own ceiling on attempts in flight, held across
-- every process by the claims.
ALTER TABLE endpoints ADD COLUMN max_concurrency BIGINT;
