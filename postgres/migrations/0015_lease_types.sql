-- Climate's lease types: the type ('' for Blazar's leases), when a waiting retry or
-- best-effort lease gives up (NULL: not one), and its priority among waiting leases.
ALTER TABLE leases
    ADD COLUMN lease_type text NOT NULL DEFAULT '',
    ADD COLUMN retry_until timestamptz,
    ADD COLUMN priority integer NOT NULL DEFAULT 0;
CREATE INDEX leases_waiting ON leases (status, priority, created_at) WHERE status IN ('WAITING', 'IN_PROGRESS');
