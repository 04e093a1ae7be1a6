-- hookd schema v15 (SQLite): background tasks (replaying what an endpoint
-- missed or sending its messages again, expunging an application's payloads), run in chunks;
-- `cursor` is the last message id a chunk finished, `filter` a bulk replay's (JSON).
CREATE TABLE background_tasks (
    id          TEXT PRIMARY KEY,
    app_id      TEXT NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    endpoint_id TEXT,
    since_ms    INTEGER,
    until_ms    INTEGER,
    filter      TEXT,
    status      TEXT NOT NULL,
    scanned     INTEGER NOT NULL DEFAULT 0,
    done        INTEGER NOT NULL DEFAULT 0,
    cursor      TEXT,
    error       TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX background_tasks_running ON background_tasks (id) WHERE status = 'running';
