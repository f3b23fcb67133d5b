-- The re-check of a write lists the chosen resources' allocations that overlap the
-- window: resource_id = ? AND end_at > start AND start_at < end. Ordered by start_at, the
-- resource index made it walk every allocation of the resource that starts before the
-- window's end: all of its history, as a new lease is usually booked after everything
-- the resource has done, so the re-check slowed down for as long as the book grew.
-- Ordered by end_at it walks the allocations that end after the window's start: what is
-- booked from then on, which the booking horizon bounds. The start stays in the index, so
-- the overlap is still decided on the index entry (0018_allocation_recheck.sql).
DROP INDEX allocations_resource;
CREATE INDEX allocations_resource ON allocations (resource_id, end_at, start_at);
