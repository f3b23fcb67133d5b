-- The notification outbox: rows written in the transactions of the changes they report.
-- seq is the commit order (SQLite has one writer). Destinations keep a cursor each.
CREATE TABLE notifications (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    event_type TEXT NOT NULL,
    lease_id   TEXT NOT NULL,
    project_id TEXT NOT NULL,
    payload    BLOB NOT NULL,
    error      TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE delivery_cursors (
    destination  TEXT PRIMARY KEY,
    position     INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_attempt INTEGER,
    last_error   TEXT NOT NULL DEFAULT '',
    updated_at   INTEGER NOT NULL
);
