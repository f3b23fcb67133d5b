-- Climate's retry cap and preemptible leases: how many re-plans a waiting lease may fail
-- before it gives up (0: no cap) and how many it has failed; whether the lease runs on
-- hosts that a reserving lease may take back, and what it does then ('' for Blazar's
-- leases, 'shrink' or 'end').
ALTER TABLE leases
    ADD COLUMN max_retries integer NOT NULL DEFAULT 0,
    ADD COLUMN retries integer NOT NULL DEFAULT 0,
    ADD COLUMN preemptible boolean NOT NULL DEFAULT false,
    ADD COLUMN on_preempt text NOT NULL DEFAULT '';

-- A preemptible lease's allocations say so themselves, so capacity checks that may take
-- them back need no join.
ALTER TABLE allocations
    ADD COLUMN preemptible boolean NOT NULL DEFAULT false;

-- The log carries it too, so a replica replaying it knows which allocations may be taken
-- back.
ALTER TABLE allocation_log
    ADD COLUMN preemptible boolean NOT NULL DEFAULT false;

-- 0012_instance_slots.sql's function, copying the new column; the triggers keep calling it.
CREATE OR REPLACE FUNCTION log_allocation_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    rev bigint;
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision' RETURNING value INTO rev;
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
