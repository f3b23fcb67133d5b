-- Writers no longer take one global lock (doc.go, "Concurrent writers"). A change to an
-- allocation no longer bumps allocation_revision as it happens, which locked meta's row
-- until commit and so serialized every writer: the row trigger numbers the transaction's
-- changes 1, 2, 3… in a transaction-local setting and logs each with revision -n. At
-- commit a deferred trigger takes the row for the instant of the commit, moves the
-- counter past the transaction's changes and gives them their revisions (base + n), so
-- revisions are still assigned in commit order and a reader that sees revision N sees
-- every change up to N.
CREATE OR REPLACE FUNCTION log_allocation_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := coalesce(nullif(current_setting('climate.allocation_changes', true), ''), '0')::bigint + 1;
BEGIN
    PERFORM set_config('climate.allocation_changes', n::text, true);
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (-n, true, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb, OLD.preemptible);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (-n, false, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb, NEW.preemptible);
    END IF;
    RETURN NULL;
END $$;

-- Runs at commit, once per logged row; the first run stamps them all and the others find
-- nothing left to do. Entries of other transactions are invisible here until they
-- commit, so "revision < 0" is exactly this transaction's.
CREATE FUNCTION stamp_allocation_changes() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := coalesce(nullif(current_setting('climate.allocation_changes', true), ''), '0')::bigint;
    base bigint;
BEGIN
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    UPDATE meta SET value = value + n WHERE key = 'allocation_revision' RETURNING value - n INTO base;
    UPDATE allocation_log SET revision = base - revision WHERE revision < 0;
    PERFORM set_config('climate.allocation_changes', '0', true);
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER allocation_log_stamp AFTER INSERT ON allocation_log
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stamp_allocation_changes();

-- The outbox's order, for the same reason: seq is taken when a notification is inserted,
-- which is no longer commit order, and a delivery worker that had read seq 8 would never
-- see a 7 committed after it. A notification's position, its place in the outbox that
-- destinations keep cursors on, is given at commit the same way as revisions, from
-- meta's outbox_position. seq stays the row's identity.
ALTER TABLE notifications ADD COLUMN position bigint;
UPDATE notifications SET position = seq;
CREATE UNIQUE INDEX notifications_position ON notifications (position);
CREATE INDEX notifications_unstamped ON notifications (seq) WHERE position IS NULL;
INSERT INTO meta (key, value) SELECT 'outbox_position', coalesce(max(seq), 0) FROM notifications;

CREATE FUNCTION stamp_notifications() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint;
    base bigint;
BEGIN
    SELECT count(*) INTO n FROM notifications WHERE position IS NULL;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    UPDATE meta SET value = value + n WHERE key = 'outbox_position' RETURNING value - n INTO base;
    UPDATE notifications SET position = base + u.rank
    FROM (SELECT seq, row_number() OVER (ORDER BY seq) AS rank FROM notifications WHERE position IS NULL) AS u
    WHERE notifications.seq = u.seq;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER notifications_stamp AFTER INSERT ON notifications
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stamp_notifications();
