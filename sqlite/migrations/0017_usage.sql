-- Usage records (Climate's extension): one row per allocation a lease ever had, what it
-- reserved and held and what it charges the project's budget, written in the
-- transactions that change the lease and kept after the lease is deleted. Times are
-- microseconds since the epoch; held_from and held_until are NULL while not yet set.
CREATE TABLE usage_records (
    lease_id       TEXT NOT NULL,
    reservation_id TEXT NOT NULL,
    allocation_id  TEXT NOT NULL,
    lease_name     TEXT NOT NULL,
    project_id     TEXT NOT NULL,
    resource_type  TEXT NOT NULL,
    resource_id    TEXT NOT NULL,
    class          TEXT NOT NULL,
    units          INTEGER NOT NULL,
    start_at       INTEGER NOT NULL,
    end_at         INTEGER NOT NULL,
    held_from      INTEGER,
    held_until     INTEGER,
    rate           REAL NOT NULL,
    cost           REAL NOT NULL,
    closed         INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    -- Clustered by lease (a lease's writes read its records), a reservation's together
    -- (the listing sums them): one b-tree, and one index for projects, so that every
    -- lease write adds little to its commit.
    PRIMARY KEY (lease_id, reservation_id, allocation_id)
) WITHOUT ROWID;
CREATE INDEX usage_records_project ON usage_records (project_id);

-- An operator's limits on a project: one JSON document (climate.EncodeLimits).
CREATE TABLE project_limits (
    project_id  TEXT PRIMARY KEY,
    limits_json TEXT NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- What each project's budget is charged (the sum of its usage records' cost), how many of
-- its leases have open records and the units of each class those hold, kept as running
-- totals so a check reads one row.
CREATE TABLE project_charges (
    project_id TEXT PRIMARY KEY,
    charged     REAL NOT NULL,
    open_leases INTEGER NOT NULL,
    open_hosts INTEGER NOT NULL,
    open_vcpus INTEGER NOT NULL,
    open_floatingips INTEGER NOT NULL
);
