-- Usage records (Climate's extension): one row per allocation a lease ever had, what it
-- reserved and held and what it charges the project's budget, written in the
-- transactions that change the lease and kept after the lease is deleted. held_from and
-- held_until are NULL while not yet set.
CREATE TABLE usage_records (
    lease_id       text COLLATE "C" NOT NULL,
    reservation_id text COLLATE "C" NOT NULL,
    allocation_id  text COLLATE "C" NOT NULL,
    lease_name     text NOT NULL,
    project_id     text COLLATE "C" NOT NULL,
    resource_type  text NOT NULL,
    resource_id    text NOT NULL,
    class          text NOT NULL,
    units          integer NOT NULL,
    start_at       timestamptz NOT NULL,
    end_at         timestamptz NOT NULL,
    held_from      timestamptz,
    held_until     timestamptz,
    rate           double precision NOT NULL,
    cost           double precision NOT NULL,
    closed         boolean NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    -- A lease's records together (its writes read them), a reservation's together (the
    -- listing sums them); one more index, for projects: little added to each lease write.
    PRIMARY KEY (lease_id, reservation_id, allocation_id)
);
CREATE INDEX usage_records_project ON usage_records (project_id, lease_id, reservation_id, allocation_id);

-- An operator's limits on a project: one JSON document (climate.EncodeLimits).
CREATE TABLE project_limits (
    project_id  text COLLATE "C" PRIMARY KEY,
    limits_json text NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- What each project's budget is charged (the sum of its usage records' cost), how many of
-- its leases have open records and the units of each class those hold, kept as running
-- totals so a check reads one row. A
-- charge updates the row, which locks it to the transaction's end: concurrent chargers of
-- one project take turns.
CREATE TABLE project_charges (
    project_id text COLLATE "C" PRIMARY KEY,
    charged     double precision NOT NULL,
    open_leases integer NOT NULL,
    open_hosts integer NOT NULL,
    open_vcpus integer NOT NULL,
    open_floatingips integer NOT NULL
);
