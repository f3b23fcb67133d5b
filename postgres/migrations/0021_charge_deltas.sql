-- A charge that nobody checks limits on (the project has none, or is exempt) is appended
-- here instead of updating project_charges, whose row lock would make every lease write
-- of the project wait for the one before it to commit (doc.go, "Concurrent writers").
-- A project's totals are its project_charges row plus its deltas; a charge that checks
-- limits, and the leader now and then, fold the deltas into the row.
CREATE TABLE project_charge_deltas (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id       text COLLATE "C" NOT NULL,
    charged          double precision NOT NULL,
    open_leases      integer NOT NULL,
    open_hosts       integer NOT NULL,
    open_vcpus       integer NOT NULL,
    open_floatingips integer NOT NULL
);
CREATE INDEX project_charge_deltas_project ON project_charge_deltas (project_id);
