-- Climate's retry cap and preemptible leases: how many re-plans a waiting lease may fail
-- before it gives up (0: no cap) and how many it has failed; whether the lease runs on
-- hosts that a reserving lease may take back (0 or 1, as degraded), and what it does then
-- ('' for Blazar's leases, 'shrink' or 'end').
ALTER TABLE leases ADD COLUMN max_retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN on_preempt TEXT NOT NULL DEFAULT '';

-- A preemptible lease's allocations say so themselves, so capacity checks that may take
-- them back need no join.
ALTER TABLE allocations ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;

-- The log carries it too, so a replica replaying it knows which allocations may be taken
-- back.
ALTER TABLE allocation_log ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;

-- The triggers of 0011_instance_slots.sql, copying the new column.
DROP TRIGGER allocations_insert_revision;
DROP TRIGGER allocations_update_revision;
DROP TRIGGER allocations_delete_revision;

CREATE TRIGGER allocations_insert_revision AFTER INSERT ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        SELECT value % 10000, 1, value, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb, NEW.preemptible
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_update_revision AFTER UPDATE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        SELECT value % 10000, 0, value, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb, OLD.preemptible
        FROM meta WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        SELECT value % 10000, 1, value, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb, NEW.preemptible
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_delete_revision AFTER DELETE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        SELECT value % 10000, 0, value, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb, OLD.preemptible
        FROM meta WHERE key = 'allocation_revision';
END;
