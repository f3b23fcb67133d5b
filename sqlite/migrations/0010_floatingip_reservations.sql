-- virtual:floatingip reservations: the external network, how many addresses, and the
-- addresses required among them (a JSON array of address strings, '[]' when none).
-- Floating IP inserts and deletes bump meta.inventory_revision in code (floatingips.go).
ALTER TABLE reservations ADD COLUMN network_id TEXT NOT NULL DEFAULT '';
ALTER TABLE reservations ADD COLUMN amount INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reservations ADD COLUMN required_floatingips TEXT NOT NULL DEFAULT '[]';
