-- Wake the engines of every replica when an event may have become due earlier: an UNDONE
-- event inserted, moved, or handed back. The payload is the schema, so installations
-- sharing a database ignore each other. NOTIFY is delivered at commit, and repeats within
-- one transaction are folded into one.
CREATE FUNCTION notify_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('climate_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END $$;

CREATE TRIGGER events_notify_insert AFTER INSERT ON events
FOR EACH ROW WHEN (NEW.status = 'UNDONE') EXECUTE FUNCTION notify_events();
CREATE TRIGGER events_notify_update AFTER UPDATE OF time, status ON events
FOR EACH ROW WHEN (NEW.status = 'UNDONE' AND (OLD.time IS DISTINCT FROM NEW.time OR OLD.status IS DISTINCT FROM NEW.status))
EXECUTE FUNCTION notify_events();
