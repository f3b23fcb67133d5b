-- Flavors (Nova's, kept by Climate in standalone mode): the instance sizes flavor:instance
-- reservations name. extra_specs is a JSON object of strings ('{}' when none). Flavors are
-- not inventory (a reservation copies the sizes it needs): no trigger moves
-- inventory_revision.
CREATE TABLE flavors (
    id          text COLLATE "C" PRIMARY KEY,
    name        text COLLATE "C" NOT NULL UNIQUE,
    vcpus       integer NOT NULL,
    ram         integer NOT NULL,
    disk        integer NOT NULL DEFAULT 0,
    ephemeral   integer NOT NULL DEFAULT 0,
    extra_specs text NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz
);
CREATE INDEX flavors_order ON flavors (created_at, id);
