-- The write transaction's re-check lists the allocations of the chosen resources that
-- overlap the window: resource_id = ? AND start_at < end AND end_at > start. With end_at
-- in the resource index, the walk over a resource's earlier allocations tests end_at on
-- the index entry itself instead of reading each row (0.4 ms of a 10-host lease
-- creation at H=5,000 / R=50,000 before).
DROP INDEX allocations_resource;
CREATE INDEX allocations_resource ON allocations (resource_id, start_at, end_at);
