-- Webhooks (Climate's extension) and each one's latest deliveries. project_id is '' for
-- an all-project webhook; event_types is a JSON array of strings ('[]': all types).
-- Times are microseconds since the epoch.
CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL,
    all_projects    INTEGER NOT NULL DEFAULT 0,
    user_id         TEXT NOT NULL,
    url             TEXT NOT NULL,
    event_types     TEXT NOT NULL DEFAULT '[]',
    secret          TEXT NOT NULL,
    enabled         INTEGER NOT NULL DEFAULT 1,
    disabled_reason TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER
);
CREATE INDEX webhooks_project ON webhooks (project_id, created_at, id);

-- One row per (webhook, notification): the last attempt's outcome. Only a webhook's
-- latest deliveries (by seq, the notification's) are kept; they go with their webhook.
CREATE TABLE webhook_deliveries (
    webhook_id       TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    notification_id  TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    event_type       TEXT NOT NULL,
    lease_id         TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    response_code    INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    first_attempt_at INTEGER,
    last_attempt_at  INTEGER,
    PRIMARY KEY (webhook_id, notification_id)
);
CREATE INDEX webhook_deliveries_seq ON webhook_deliveries (webhook_id, seq);
