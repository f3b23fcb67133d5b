-- Hosts' maintenance windows (Climate's extension): a host is out of service from start_at
-- until end_at, or until further notice when end_at is NULL. They go with their host.
-- Numbered 0014: 0015 belongs to lease types.
CREATE TABLE maintenances (
    id         text COLLATE "C" PRIMARY KEY,
    host_id    text COLLATE "C" NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    start_at   timestamptz NOT NULL,
    end_at     timestamptz,
    reason     text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);
CREATE INDEX maintenances_host ON maintenances (host_id, start_at);

-- Windows are inventory: adding, changing or removing one (a host's deletion included)
-- moves inventory_revision, so a planner's cached view notices.
CREATE TRIGGER maintenances_inventory AFTER INSERT OR DELETE ON maintenances
FOR EACH ROW EXECUTE FUNCTION bump_inventory_revision();
CREATE TRIGGER maintenances_inventory_update AFTER UPDATE ON maintenances
FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION bump_inventory_revision();

-- Healing looks at degraded leases again whenever a window changes.
CREATE INDEX leases_degraded ON leases (end_at) WHERE degraded;
