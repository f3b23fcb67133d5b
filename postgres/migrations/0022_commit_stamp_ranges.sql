-- The commit-time stamps of 0020, made to cost what the transaction wrote, not what the
-- schema has seen.
--
-- 0020 logged a transaction's changes with revisions -1, -2, … and stamped them at commit
-- with "WHERE revision < 0"; every transaction used the same few negative keys, so until
-- a vacuum that range of the index held a dead entry for every change ever stamped, and
-- each commit walked them all (7 ms at 26,000 changes since the last vacuum, growing).
-- The outbox's "WHERE position IS NULL" did the same with its partial index. Now each
-- transaction numbers its provisional entries in a range of its own, keyed by its
-- transaction id: -(xid · 2^24 + n). The stamp reads exactly that range. Correctness does
-- not rest on the ranges being disjoint: the only negative rows a transaction can see are
-- its own (others' are uncommitted, or were stamped before they committed); the key only
-- keeps the index walk short.
--
-- The counters' rows are also no longer waited for directly. Waiting for a row lock is
-- waiting for the holder's transaction: when it commits every waiter wakes, they race
-- for the row and all but one sleep again, a convoy that costs far more than the commit.
-- The stamps first take one advisory lock per installation, which the lock manager hands
-- to waiters one at a time in the order they asked; it is released with the transaction's
-- other locks once its commit is visible.

-- The start of this transaction's range, as a negative number's magnitude.
CREATE FUNCTION provisional_base() RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT (pg_current_xact_id()::text::bigint & 4294967295) * 16777216
$$;

-- Takes n numbers of meta's counter for this transaction, under the commit-stamp lock,
-- and returns the one before the first.
CREATE FUNCTION take_stamps(counter text, n bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    base bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || '/commit-stamp', 0));
    UPDATE meta SET value = value + n WHERE key = counter RETURNING value - n INTO base;
    RETURN base;
END $$;

CREATE OR REPLACE FUNCTION log_allocation_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := coalesce(nullif(current_setting('climate.allocation_changes', true), ''), '0')::bigint + 1;
    rev bigint := -(provisional_base() + n);
BEGIN
    PERFORM set_config('climate.allocation_changes', n::text, true);
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (rev, true, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb, OLD.preemptible);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (rev, false, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb, NEW.preemptible);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION stamp_allocation_changes() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := coalesce(nullif(current_setting('climate.allocation_changes', true), ''), '0')::bigint;
    off bigint;
    base bigint;
BEGIN
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    off := provisional_base();
    base := take_stamps('allocation_revision', n);
    UPDATE allocation_log SET revision = base - revision - off
    WHERE revision BETWEEN -(off + n) AND -(off + 1);
    PERFORM set_config('climate.allocation_changes', '0', true);
    RETURN NULL;
END $$;

-- A notification gets its provisional position as it is inserted, numbered like the
-- allocation log's entries.
CREATE FUNCTION number_notification() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := coalesce(nullif(current_setting('climate.outbox_changes', true), ''), '0')::bigint + 1;
BEGIN
    PERFORM set_config('climate.outbox_changes', n::text, true);
    NEW.position := -(provisional_base() + n);
    RETURN NEW;
END $$;

CREATE TRIGGER notifications_number BEFORE INSERT ON notifications
FOR EACH ROW EXECUTE FUNCTION number_notification();

CREATE OR REPLACE FUNCTION stamp_notifications() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := coalesce(nullif(current_setting('climate.outbox_changes', true), ''), '0')::bigint;
    off bigint;
    base bigint;
BEGIN
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    off := provisional_base();
    base := take_stamps('outbox_position', n);
    UPDATE notifications SET position = base - position - off
    WHERE position BETWEEN -(off + n) AND -(off + 1);
    PERFORM set_config('climate.outbox_changes', '0', true);
    RETURN NULL;
END $$;

DROP INDEX notifications_unstamped;
