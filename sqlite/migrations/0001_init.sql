-- Times are INTEGER microseconds since the Unix epoch, UTC; NULL means "never".

CREATE TABLE leases (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    project_id TEXT NOT NULL,
    trust_id   TEXT NOT NULL DEFAULT '',
    start_at   INTEGER NOT NULL,
    end_at     INTEGER NOT NULL,
    status     TEXT NOT NULL,
    degraded   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER
);
CREATE INDEX leases_project ON leases (project_id, created_at);
CREATE INDEX leases_created ON leases (created_at);

CREATE TABLE reservations (
    id                    TEXT PRIMARY KEY,
    lease_id              TEXT NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    resource_type         TEXT NOT NULL,
    status                TEXT NOT NULL,
    min_count             INTEGER NOT NULL,
    max_count             INTEGER NOT NULL,
    hypervisor_properties TEXT NOT NULL,
    resource_properties   TEXT NOT NULL,
    before_end            TEXT NOT NULL,
    missing_resources     INTEGER NOT NULL DEFAULT 0,
    resources_changed     INTEGER NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER
);
CREATE INDEX reservations_lease ON reservations (lease_id);

-- resource_id has no foreign key: it names hosts now and other resource types later.
CREATE TABLE allocations (
    id             TEXT PRIMARY KEY,
    reservation_id TEXT NOT NULL REFERENCES reservations (id) ON DELETE CASCADE,
    lease_id       TEXT NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    resource_id    TEXT NOT NULL,
    start_at       INTEGER NOT NULL,
    end_at         INTEGER NOT NULL
);
CREATE INDEX allocations_resource ON allocations (resource_id, start_at);
CREATE INDEX allocations_end ON allocations (end_at);
CREATE INDEX allocations_reservation ON allocations (reservation_id);
CREATE INDEX allocations_lease ON allocations (lease_id);

CREATE TABLE events (
    id            TEXT PRIMARY KEY,
    lease_id      TEXT NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    event_type    TEXT NOT NULL,
    time          INTEGER NOT NULL,
    status        TEXT NOT NULL,
    claimed_until INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER
);
CREATE INDEX events_lease ON events (lease_id);
CREATE INDEX events_due ON events (status, time);
CREATE INDEX events_claims ON events (status, claimed_until);

CREATE TABLE hosts (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    hypervisor_hostname TEXT NOT NULL UNIQUE,
    service_name        TEXT NOT NULL,
    vcpus               INTEGER NOT NULL,
    memory_mb           INTEGER NOT NULL,
    local_gb            INTEGER NOT NULL,
    cpu_info            TEXT NOT NULL,
    hypervisor_type     TEXT NOT NULL,
    hypervisor_version  INTEGER NOT NULL,
    availability_zone   TEXT NOT NULL,
    trust_id            TEXT NOT NULL,
    reservable          INTEGER NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER
);

CREATE TABLE resource_properties (
    id            TEXT PRIMARY KEY,
    resource_type TEXT NOT NULL,
    name          TEXT NOT NULL,
    private       INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER,
    UNIQUE (resource_type, name)
);

CREATE TABLE host_extras (
    host_id     TEXT NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    property_id TEXT NOT NULL REFERENCES resource_properties (id),
    value       TEXT NOT NULL,
    PRIMARY KEY (host_id, property_id)
);
CREATE INDEX host_extras_property ON host_extras (property_id);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO meta (key, value) VALUES ('inventory_revision', 0);
