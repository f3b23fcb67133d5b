-- Lease lists page by keyset in list order, (created_at, id): with id in the index a page
-- starts with one seek and needs no sort, even when many leases share a created_at (a
-- bulk load gives them all the same one).
DROP INDEX leases_created;
DROP INDEX leases_project;
CREATE INDEX leases_created ON leases (created_at, id);
CREATE INDEX leases_project ON leases (project_id, created_at, id);
