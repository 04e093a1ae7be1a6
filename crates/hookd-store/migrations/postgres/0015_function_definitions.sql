-- hookd schema v15 (PostgreSQL): which definition of each function is in place.
--
-- The functions' current definitions now live in `migrations/postgres-functions/` (one file
-- each, applied after the numbered migrations); this table records the definition number in
-- place for each, so that no process replaces a function with an older definition than the one
-- it finds (see that folder's README.md).

CREATE TABLE function_definitions (
    name       TEXT PRIMARY KEY,
    definition BIGINT NOT NULL,
    applied_at BIGINT NOT NULL
);
