-- The write transaction's re-check lists the allocations of the chosen resources that
-- overlap the window: with end_at in the resource index, the walk over a resource's
-- earlier allocations tests end_at on the index entry instead of reading each row.
DROP INDEX allocations_resource;
CREATE INDEX allocations_resource ON allocations (resource_id, start_at, end_at);
