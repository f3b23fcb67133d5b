-- Instance reservations (virtual:instance, flavor:instance): the size of one slot, the
-- affinity (true one host, false distinct hosts, NULL anywhere) and the server group
-- enforcing it.
ALTER TABLE reservations
    ADD COLUMN vcpus integer NOT NULL DEFAULT 0,
    ADD COLUMN memory_mb integer NOT NULL DEFAULT 0,
    ADD COLUMN disk_gb integer NOT NULL DEFAULT 0,
    ADD COLUMN affinity boolean NULL,
    ADD COLUMN server_group_id text NOT NULL DEFAULT '';

-- Shared allocations: slots > 0 instance slots of vcpus/memory_mb/disk_gb each on the
-- resource (a host); slots = 0 holds the whole resource, as every allocation did before.
ALTER TABLE allocations
    ADD COLUMN slots integer NOT NULL DEFAULT 0,
    ADD COLUMN vcpus integer NOT NULL DEFAULT 0,
    ADD COLUMN memory_mb integer NOT NULL DEFAULT 0,
    ADD COLUMN disk_gb integer NOT NULL DEFAULT 0;

-- Slot allocations of one host may overlap each other (their capacity is the manager's
-- re-check, under the writer lock); two whole-resource allocations still may not, nor a
-- whole-resource allocation and a slot allocation. Both deferred, as the original.
ALTER TABLE allocations DROP CONSTRAINT allocations_no_overlap;
ALTER TABLE allocations
    ADD CONSTRAINT allocations_no_overlap EXCLUDE USING gist (
        resource_id WITH =,
        tstzrange(start_at, end_at, '[)') WITH &&
    ) WHERE (slots = 0) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT allocations_whole_or_slots EXCLUDE USING gist (
        resource_id WITH =,
        tstzrange(start_at, end_at, '[)') WITH &&,
        ((slots > 0)::int) WITH <>
    ) DEFERRABLE INITIALLY DEFERRED;

-- The log carries them too, so a replica replaying it knows what each change books.
ALTER TABLE allocation_log
    ADD COLUMN slots integer NOT NULL DEFAULT 0,
    ADD COLUMN vcpus integer NOT NULL DEFAULT 0,
    ADD COLUMN memory_mb integer NOT NULL DEFAULT 0,
    ADD COLUMN disk_gb integer NOT NULL DEFAULT 0;

-- 0002_revisions.sql's function, copying the new columns; the triggers keep calling it.
CREATE OR REPLACE FUNCTION log_allocation_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    rev bigint;
BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'allocation_revision' RETURNING value INTO rev;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb)
        VALUES (rev, true, OLD.id, OLD.reservation_id, OLD.lease_id, OLD.resource_id, OLD.start_at, OLD.end_at,
            OLD.slots, OLD.vcpus, OLD.memory_mb, OLD.disk_gb);
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb)
        VALUES (rev, false, NEW.id, NEW.reservation_id, NEW.lease_id, NEW.resource_id, NEW.start_at, NEW.end_at,
            NEW.slots, NEW.vcpus, NEW.memory_mb, NEW.disk_gb);
    END IF;
    RETURN NULL;
END $$;
