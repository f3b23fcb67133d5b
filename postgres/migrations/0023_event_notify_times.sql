-- The events' NOTIFY says when the event is due, so an engine asleep until before then
-- sleeps on (engine.Engine.WakeFor): a lease created hours ahead no longer sets off a
-- pass of every replica's engine. An event's payload is "<due, µs since the epoch>:<schema>",
-- the outbox's "outbox:<schema>" (it wakes the delivery workers, not the engines).
-- Notifications with the same payload within one transaction are still folded into one.
CREATE OR REPLACE FUNCTION notify_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('climate_events', floor(extract(epoch FROM NEW.time) * 1000000)::bigint || ':' || TG_TABLE_SCHEMA);
    RETURN NULL;
END $$;

CREATE FUNCTION notify_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('climate_events', 'outbox:' || TG_TABLE_SCHEMA);
    RETURN NULL;
END $$;

DROP TRIGGER notifications_notify_insert ON notifications;
CREATE TRIGGER notifications_notify_insert AFTER INSERT ON notifications
FOR EACH STATEMENT EXECUTE FUNCTION notify_outbox();
