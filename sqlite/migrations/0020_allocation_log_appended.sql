-- The allocation log becomes a table appended to, whose rowid is the revision, and the
-- allocation revision is its newest row's (log.go). The ring of 0003 cost each changed
-- allocation row an update of meta's counter, a read of it back and the replacement of
-- the ring slot's old row: as much as the allocation's own six b-tree inserts. Now a
-- change costs one append at the end of one b-tree. The writer deletes the rows that fall
-- logSlots revisions behind now and then (batch.go), not every change.
--
-- Each half of a change has a revision of its own: an update is a removal at r and an
-- addition at r + 1. A row with added = -1 changes nothing: it carries the revision the
-- log starts from, so the log is never empty and its next rowid never goes back.
--
-- The ring's rows are not carried over (a change's two halves shared a revision there):
-- the floor moves up to the revision found, and an index behind it rebuilds, as one
-- behind the ring did.
DROP TRIGGER allocations_insert_revision;
DROP TRIGGER allocations_update_revision;
DROP TRIGGER allocations_delete_revision;
DROP TABLE allocation_log;

CREATE TABLE allocation_log (
    revision       INTEGER PRIMARY KEY,
    added          INTEGER NOT NULL,
    id             TEXT NOT NULL,
    reservation_id TEXT NOT NULL,
    lease_id       TEXT NOT NULL,
    resource_id    TEXT NOT NULL,
    start_at       INTEGER NOT NULL,
    end_at         INTEGER NOT NULL,
    slots          INTEGER NOT NULL,
    vcpus          INTEGER NOT NULL,
    memory_mb      INTEGER NOT NULL,
    disk_gb        INTEGER NOT NULL,
    preemptible    INTEGER NOT NULL
);

INSERT INTO allocation_log (revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at,
        slots, vcpus, memory_mb, disk_gb, preemptible)
    SELECT value, -1, '', '', '', '', 0, 0, 0, 0, 0, 0, 0 FROM meta WHERE key = 'allocation_revision';
UPDATE meta SET value = (SELECT value FROM meta WHERE key = 'allocation_revision') WHERE key = 'allocation_log_floor';
-- Gone, so that nothing reads a counter that no longer moves.
DELETE FROM meta WHERE key = 'allocation_revision';

CREATE TRIGGER allocations_insert_logged AFTER INSERT ON allocations
BEGIN
    INSERT INTO allocation_log (added, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (1, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb, NEW.preemptible);
END;

CREATE TRIGGER allocations_update_logged AFTER UPDATE ON allocations
BEGIN
    INSERT INTO allocation_log (added, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (0, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb, OLD.preemptible);
    INSERT INTO allocation_log (added, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (1, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb, NEW.preemptible);
END;

CREATE TRIGGER allocations_delete_logged AFTER DELETE ON allocations
BEGIN
    INSERT INTO allocation_log (added, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        VALUES (0, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb, OLD.preemptible);
END;
