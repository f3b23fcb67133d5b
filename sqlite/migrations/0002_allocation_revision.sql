-- allocation_revision increases whenever an allocation row is added, changed or removed
-- (cascades included), so an in-memory availability index can tell whether it is current.
INSERT INTO meta (key, value) VALUES ('allocation_revision', 0);

CREATE TRIGGER allocations_insert_revision AFTER INSERT ON allocations
BEGIN UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision'; END;

CREATE TRIGGER allocations_update_revision AFTER UPDATE ON allocations
BEGIN UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision'; END;

CREATE TRIGGER allocations_delete_revision AFTER DELETE ON allocations
BEGIN UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision'; END;
