-- hookd schema v15 (SQLite): background tasks (replaying what an endpoint
-- missed or sending its messages again, expunging an application's payloads, statistics), run
-- in chunks. `cursor` is the last message (or application) id a chunk finished, `filter` a
-- bulk replay's or a statistics task's applications (JSON), `result` a statistics task's
-- lines (JSON); `app_id` is NULL for a task over every application.
CREATE TABLE background_tasks (
    id          TEXT PRIMARY KEY,
    app_id      TEXT REFERENCES applications(id) ON DELETE CASCADE,
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
    result      TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX background_tasks_running ON background_tasks (id) WHERE status = 'running';
