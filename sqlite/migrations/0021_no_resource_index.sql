-- The resource index goes. A lease creation's ten allocations each put an entry in the
-- leaf of their own host's part of it: ten leaves read and written to the WAL (and
-- copied back by checkpoints) a creation, no two shared by a batch, which made it the
-- largest part of the one writer's work. Its main reader, the commit's re-check, now
-- takes what the plan's index held with the log's changes since (climate.SerialLog);
-- what else lists a host's allocations (a host's update or deletion, the hosts'
-- allocations list, healing) searches the end_at index, as over all resources.
DROP INDEX allocations_resource;
