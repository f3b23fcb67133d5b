-- Change counters, kept by triggers so that no write path can forget them (cascades
-- included). Update locks the allocation_revision row first: it is also the writer lock.
CREATE TABLE meta (
    key   text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO meta (key, value) VALUES
    ('inventory_revision', 0),
    ('allocation_revision', 0),
    -- The highest revision whose log entries may have been pruned.
    ('allocation_log_pruned', 0);

-- One row per allocation added or removed; a changed row is a removal of the old row and
-- an addition of the new one at one revision, so replicas can replay the deltas.
CREATE TABLE allocation_log (
    seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    revision       bigint NOT NULL,
    removed        boolean NOT NULL,
    allocation_id  text COLLATE "C" NOT NULL,
    reservation_id text COLLATE "C" NOT NULL,
    lease_id       text COLLATE "C" NOT NULL,
    resource_id    text COLLATE "C" NOT NULL,
    start_at       timestamptz NOT NULL,
    end_at         timestamptz NOT NULL
);
CREATE INDEX allocation_log_revision ON allocation_log (revision);

-- Functions resolve tables in the schema they were created in, whatever the caller's
-- search_path (SET search_path FROM CURRENT).
CREATE FUNCTION log_allocation_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    rev bigint;
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision' RETURNING value INTO rev;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at)
        VALUES (rev, true, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at)
        VALUES (rev, false, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER allocations_log AFTER INSERT OR DELETE ON allocations
FOR EACH ROW EXECUTE FUNCTION log_allocation_change();
CREATE TRIGGER allocations_log_update AFTER UPDATE ON allocations
FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION log_allocation_change();

CREATE FUNCTION bump_inventory_revision() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'inventory_revision';
    RETURN NULL;
END $$;

CREATE TRIGGER hosts_inventory AFTER INSERT OR DELETE ON hosts
FOR EACH ROW EXECUTE FUNCTION bump_inventory_revision();
CREATE TRIGGER hosts_inventory_update AFTER UPDATE ON hosts
FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION bump_inventory_revision();
CREATE TRIGGER host_extras_inventory AFTER INSERT OR DELETE ON host_extras
FOR EACH ROW EXECUTE FUNCTION bump_inventory_revision();
CREATE TRIGGER host_extras_inventory_update AFTER UPDATE ON host_extras
FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION bump_inventory_revision();
CREATE TRIGGER resource_properties_inventory AFTER INSERT OR DELETE ON resource_properties
FOR EACH ROW EXECUTE FUNCTION bump_inventory_revision();
CREATE TRIGGER resource_properties_inventory_update AFTER UPDATE ON resource_properties
FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION bump_inventory_revision();
