-- The floating IP inventory (Blazar's virtual:floatingip plugin, standalone: no Neutron).
-- floating_ip_address is in canonical form (Go's netip.Addr.String()), so the unique
-- constraint sees one address one way. subnet_id is '' when not given.
CREATE TABLE floatingips (
    id                  text COLLATE "C" PRIMARY KEY,
    floating_network_id text COLLATE "C" NOT NULL,
    subnet_id           text COLLATE "C" NOT NULL DEFAULT '',
    floating_ip_address text COLLATE "C" NOT NULL,
    reservable          boolean NOT NULL DEFAULT true,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz,
    UNIQUE (floating_network_id, floating_ip_address)
);
CREATE INDEX floatingips_order ON floatingips (created_at, id);
