-- hookd schema v8 (SQLite): an endpoint's own ceiling on attempts in flight.
ALTER TABLE endpoints ADD COLUMN max_concurrency INTEGER;
