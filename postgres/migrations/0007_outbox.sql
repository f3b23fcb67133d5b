-- The notification outbox: rows written in the transactions of the changes they report.
-- Writers are serialized (doc.go), so seq, taken inside the transaction, is commit order.
-- Destinations keep a cursor each.
CREATE TABLE notifications (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text COLLATE "C" NOT NULL UNIQUE,
    event_type text NOT NULL,
    lease_id   text COLLATE "C" NOT NULL,
    project_id text NOT NULL,
    payload    bytea NOT NULL,
    error      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);

CREATE TABLE delivery_cursors (
    destination  text COLLATE "C" PRIMARY KEY,
    position     bigint NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    next_attempt timestamptz,
    last_error   text NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL
);

-- A new notification wakes every replica's delivery worker, on the events' channel.
CREATE TRIGGER notifications_notify_insert AFTER INSERT ON notifications
FOR EACH STATEMENT EXECUTE FUNCTION notify_events();
