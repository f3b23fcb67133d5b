-- Flavors (Nova's, kept by Climate in standalone mode): the instance sizes flavor:instance
-- reservations name. extra_specs is a JSON object of strings ('{}' when none). Flavors are
-- not inventory (a reservation copies the sizes it needs), so nothing here moves
-- meta.inventory_revision. Times are microseconds since the epoch.
CREATE TABLE flavors (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    vcpus       INTEGER NOT NULL,
    ram         INTEGER NOT NULL,
    disk        INTEGER NOT NULL DEFAULT 0,
    ephemeral   INTEGER NOT NULL DEFAULT 0,
    extra_specs TEXT NOT NULL DEFAULT '{}',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER
);
CREATE INDEX flavors_order ON flavors (created_at, id);
