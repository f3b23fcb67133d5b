-- allocation_log records every allocation change under the allocation_revision it moved
-- the counter to, so another process's availability index can apply the deltas instead of
-- rebuilding (climate.AllocationLog). A changed row is a removal (added = 0) and an
-- addition (added = 1) at one revision.
--
-- The log is a ring of 10,000 slots (logSlots in log.go): revision r is written to slot
-- r % 10000, replacing revision r - 10000. That bounds it without a pruning statement,
-- which would cost as much again as the logging on every allocation write (SQLite compiles
-- the triggers into each INSERT, UPDATE and DELETE on allocations). A slot's other half
-- may hold an older revision than the ring's; readers skip it by revision.
CREATE TABLE allocation_log (
    slot           INTEGER NOT NULL,
    added          INTEGER NOT NULL,
    revision       INTEGER NOT NULL,
    id             TEXT NOT NULL,
    reservation_id TEXT NOT NULL,
    lease_id       TEXT NOT NULL,
    resource_id    TEXT NOT NULL,
    start_at       INTEGER NOT NULL,
    end_at         INTEGER NOT NULL,
    PRIMARY KEY (slot, added)
) WITHOUT ROWID;

-- Changes made before this migration were not logged: the log starts here.
INSERT INTO meta (key, value) SELECT 'allocation_log_floor', value FROM meta WHERE key = 'allocation_revision';

-- The revision triggers are replaced, not joined by siblings: SQLite does not define the
-- order in which triggers on one event fire, and the log needs the counter after the bump.
DROP TRIGGER allocations_insert_revision;
DROP TRIGGER allocations_update_revision;
DROP TRIGGER allocations_delete_revision;

CREATE TRIGGER allocations_insert_revision AFTER INSERT ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value % 10000, 1, value, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_update_revision AFTER UPDATE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value % 10000, 0, value, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at
        FROM meta WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value % 10000, 1, value, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_delete_revision AFTER DELETE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT OR REPLACE INTO allocation_log (slot, added, revision, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value % 10000, 0, value, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at
        FROM meta WHERE key = 'allocation_revision';
END;
