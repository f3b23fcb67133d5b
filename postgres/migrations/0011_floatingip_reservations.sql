-- virtual:floatingip reservations: the external network, how many addresses, and the
-- addresses required among them (a JSON array of address strings, '[]' when none).
ALTER TABLE reservations
    ADD COLUMN network_id text NOT NULL DEFAULT '',
    ADD COLUMN amount integer NOT NULL DEFAULT 0,
    ADD COLUMN required_floatingips text NOT NULL DEFAULT '[]';

-- Floating IPs are inventory: adding or removing one moves inventory_revision, as hosts
-- do, so a planner's cached view of the inventory notices.
CREATE TRIGGER floatingips_inventory AFTER INSERT OR DELETE ON floatingips
FOR EACH ROW EXECUTE FUNCTION bump_inventory_revision();
CREATE TRIGGER floatingips_inventory_update AFTER UPDATE ON floatingips
FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW) EXECUTE FUNCTION bump_inventory_revision();
