-- The floating IP inventory (Blazar's virtual:floatingip plugin, standalone: no Neutron).
-- floating_ip_address is in canonical form (Go's netip.Addr.String()), so the unique
-- constraint sees one address one way. subnet_id is '' when not given. Times are
-- microseconds since the epoch.
CREATE TABLE floatingips (
    id                  TEXT PRIMARY KEY,
    floating_network_id TEXT NOT NULL,
    subnet_id           TEXT NOT NULL DEFAULT '',
    floating_ip_address TEXT NOT NULL,
    reservable          INTEGER NOT NULL DEFAULT 1,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER,
    UNIQUE (floating_network_id, floating_ip_address)
);
CREATE INDEX floatingips_order ON floatingips (created_at, id);
