-- allocation_log records every allocation change under the allocation_revision it moved
-- the counter to, so another process's availability index can apply the deltas instead of
-- rebuilding (climate.AllocationLog). A changed row is a removal (added = 0) and an
-- addition (added = 1) at one revision; the key orders a revision's removal first.
CREATE TABLE allocation_log (
    revision       INTEGER NOT NULL,
    added          INTEGER NOT NULL,
    id             TEXT NOT NULL,
    reservation_id TEXT NOT NULL,
    lease_id       TEXT NOT NULL,
    resource_id    TEXT NOT NULL,
    start_at       INTEGER NOT NULL,
    end_at         INTEGER NOT NULL,
    PRIMARY KEY (revision, added)
) WITHOUT ROWID;

-- The log is complete only above allocation_log_floor: changes made before this migration
-- were not logged, and pruning raises the floor.
INSERT INTO meta (key, value) SELECT 'allocation_log_floor', value FROM meta WHERE key = 'allocation_revision';

-- The revision triggers are replaced, not joined by siblings: SQLite does not define the
-- order in which triggers on one event fire, and the log needs the counter after the bump.
DROP TRIGGER allocations_insert_revision;
DROP TRIGGER allocations_update_revision;
DROP TRIGGER allocations_delete_revision;

CREATE TRIGGER allocations_insert_revision AFTER INSERT ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT INTO allocation_log (revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value, 1, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_update_revision AFTER UPDATE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT INTO allocation_log (revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value, 0, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at
        FROM meta WHERE key = 'allocation_revision';
    INSERT INTO allocation_log (revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value, 1, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at
        FROM meta WHERE key = 'allocation_revision';
END;

CREATE TRIGGER allocations_delete_revision AFTER DELETE ON allocations
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision';
    INSERT INTO allocation_log (revision, added, id, reservation_id, lease_id, resource_id, start_at, end_at)
        SELECT value, 0, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at
        FROM meta WHERE key = 'allocation_revision';
END;

-- Pruning keeps the newest allocation_log_keep revisions (up to 10% more: it runs once
-- every keep/10 revisions, so most changes pay nothing for it; twice for an update,
-- harmlessly). Every revision is logged, so each multiple is reached.
INSERT INTO meta (key, value) VALUES ('allocation_log_keep', 10000);

CREATE TRIGGER allocation_log_prune AFTER INSERT ON allocation_log
WHEN NEW.revision % max((SELECT value FROM meta WHERE key = 'allocation_log_keep') / 10, 1) = 0
BEGIN
    DELETE FROM allocation_log
        WHERE revision <= NEW.revision - (SELECT value FROM meta WHERE key = 'allocation_log_keep');
    UPDATE meta SET value = NEW.revision - (SELECT value FROM meta WHERE key = 'allocation_log_keep')
        WHERE key = 'allocation_log_floor' AND value < NEW.revision - (SELECT value FROM meta WHERE key = 'allocation_log_keep');
END;
