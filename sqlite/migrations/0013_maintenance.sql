-- Hosts' maintenance windows (Climate's extension): a host is out of service from start_at
-- until end_at, or until further notice when end_at is NULL. Windows are inventory: the
-- store moves meta.inventory_revision when one is added or removed. They go with their
-- host. Times are microseconds since the epoch. Numbered 0013: 0014 belongs to lease types.
CREATE TABLE maintenances (
    id         TEXT PRIMARY KEY,
    host_id    TEXT NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    start_at   INTEGER NOT NULL,
    end_at     INTEGER,
    reason     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);
CREATE INDEX maintenances_host ON maintenances (host_id, start_at);

-- Healing looks at degraded leases again whenever a window changes.
CREATE INDEX leases_degraded ON leases (end_at) WHERE degraded = 1;
