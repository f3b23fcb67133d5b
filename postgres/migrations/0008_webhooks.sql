-- Webhooks (Climate's extension) and each one's latest deliveries. project_id is '' for
-- an all-project webhook; event_types is a JSON array of strings ('[]': all types), kept
-- as text as SQLite keeps it. No trigger: the delivery worker is woken by new
-- notifications, and reads the webhooks every round.
CREATE TABLE webhooks (
    id              text COLLATE "C" PRIMARY KEY,
    project_id      text NOT NULL,
    all_projects    boolean NOT NULL DEFAULT false,
    user_id         text NOT NULL,
    url             text NOT NULL,
    event_types     text NOT NULL DEFAULT '[]',
    secret          text NOT NULL,
    enabled         boolean NOT NULL DEFAULT true,
    disabled_reason text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz
);
CREATE INDEX webhooks_project ON webhooks (project_id, created_at, id);

-- One row per (webhook, notification): the last attempt's outcome. Only a webhook's
-- latest deliveries (by seq, the notification's) are kept; they go with their webhook.
CREATE TABLE webhook_deliveries (
    webhook_id       text COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    notification_id  text COLLATE "C" NOT NULL,
    seq              bigint NOT NULL,
    event_type       text NOT NULL,
    lease_id         text COLLATE "C" NOT NULL,
    status           text NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    response_code    integer NOT NULL DEFAULT 0,
    last_error       text NOT NULL DEFAULT '',
    first_attempt_at timestamptz,
    last_attempt_at  timestamptz,
    PRIMARY KEY (webhook_id, notification_id)
);
CREATE INDEX webhook_deliveries_seq ON webhook_deliveries (webhook_id, seq);
