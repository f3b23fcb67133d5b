-- Instance reservations (virtual:instance, flavor:instance): the size of one slot, the
-- affinity (1 one host, 0 distinct hosts, NULL anywhere) and the server group enforcing it.
ALTER TABLE reservations ADD COLUMN vcpus INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reservations ADD COLUMN memory_mb INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reservations ADD COLUMN disk_gb INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reservations ADD COLUMN affinity INTEGER;
ALTER TABLE reservations ADD COLUMN server_group_id TEXT NOT NULL DEFAULT '';

-- Shared allocations: slots > 0 instance slots of vcpus/memory_mb/disk_gb each on the
-- resource (a host); slots = 0 holds the whole resource, as every allocation did before.
ALTER TABLE allocations ADD COLUMN slots INTEGER NOT NULL DEFAULT 0;
ALTER TABLE allocations ADD COLUMN vcpus INTEGER NOT NULL DEFAULT 0;
ALTER TABLE allocations ADD COLUMN memory_mb INTEGER NOT NULL DEFAULT 0;
ALTER TABLE allocations ADD COLUMN disk_gb INTEGER NOT NULL DEFAULT 0;

-- The log carries them too, so a replica replaying it knows what each change books.
ALTER TABLE allocation_log ADD COLUMN slots INTEGER NOT NULL DEFAULT 0;
ALTER TABLE allocation_log ADD COLUMN vcpus INTEGER NOT NULL DEFAULT 0;
ALTER TABLE allocation_log ADD COLUMN memory_mb INTEGER NOT NULL DEFAULT 0;
ALTER TABLE allocation_log ADD COLUMN disk_gb INTEGER NOT NULL DEFAULT 0;

-- The triggers of 0003_allocation_log.sql, copying the new columns.
DROP TRIGGER allocations_insert_revision;
DROP TRIGGER allocations_update_revision;
DROP TRIGGER allocations_delete_revision;

CREATE TRIGGER allocations_insert_revision AFTER INSERT ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb)
        SELECT value % 10000, 1, value, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_update_revision AFTER UPDATE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb)
        SELECT value % 10000, 0, value, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb
        FROM meta WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb)
        SELECT value % 10000, 1, value, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_delete_revision AFTER DELETE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb)
        SELECT value % 10000, 0, value, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb
        FROM meta WHERE key = 'allocation_revision';
END;
