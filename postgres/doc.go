// Package postgres is Climate's scale-out store: several `climate serve` replicas share one
// PostgreSQL database (each installation in its own schema, chosen by the search_path
// parameter of the URL) and coordinate only through it.
//
// # One writer at a time
//
// Every Update starts by locking one row, meta's allocation_revision, FOR UPDATE, and holds
// it until commit or rollback. Write transactions are therefore serialized across every
// process sharing the schema, exactly like the SQLite store's single writer:
//
//   - The manager's in-transaction re-check (is any chosen host booked over the window?) is
//     authoritative: nobody can commit between the check and the insert, so a plan is
//     never rejected late and nothing is ever rolled back half-way through a use-case.
//   - AllocationRevision and InventoryRevision are exact: revisions are assigned in commit
//     order, so a reader that sees revision N has seen every change up to N, and a replica
//     replaying the allocation log never misses one committed "in between".
//   - Writes under READ COMMITTED need no serialization-failure retries: each statement
//     after the lock sees every earlier commit.
//
// A row lock rather than an advisory lock because the row is the revision counter itself:
// any transaction that changes allocations bumps it through the triggers, so even writes
// that bypass Update (a maintenance script) queue behind the same lock and keep the
// counter in commit order. Writes are short (planning happens before, in a View, and no
// external call runs inside a transaction), so one writer is not the bottleneck; reads
// (Views) never wait for it. Within a process, Updates also queue on a local semaphore
// before taking a pooled connection, so writers waiting for the lock never take every
// connection away from reads.
//
// # The exclusion constraints
//
// The invariant that matters most, no resource double-booked, is also stated to the
// database. An allocation holds either the whole resource (slots = 0) or some instance
// slots of a shared host (slots > 0), and allocations carry
//
//	allocations_no_overlap EXCLUDE USING gist (resource_id WITH =,
//	    tstzrange(start_at, end_at, '[)') WITH &&) WHERE (slots = 0)
//	allocations_whole_or_slots EXCLUDE USING gist (resource_id WITH =,
//	    tstzrange(start_at, end_at, '[)') WITH &&, ((slots > 0)::int) WITH <>)
//
// both DEFERRABLE INITIALLY DEFERRED: two whole-resource allocations of one resource never
// overlap, and a whole-resource allocation never overlaps a slot allocation. Slot
// allocations may overlap each other; that they fit the host's capacity is not a
// constraint but the manager's re-check inside the serialized write transaction.
//
// With the writer lock, the manager's re-check already prevents overlaps, so the
// constraints normally never fire. They are there so the invariant holds even if
// application code is wrong (a bug in planning or re-checking, a store method misused, a
// manual SQL fix): such a write fails at COMMIT with SQLSTATE 23P01, which Update returns
// wrapping climate.ErrConflictRetry whichever constraint fired, so the manager re-plans
// instead of double booking. They are deferred so that a lease update rewriting its own
// rows is judged on the final state. They need the btree_gist extension, which Open
// creates in public (never in an installation's schema: dropping one installation must
// not drop what the others use).
//
// # Reads, events, replicas
//
// View is a read-only REPEATABLE READ transaction: one snapshot, and writes fail. Due
// events are claimed with FOR UPDATE SKIP LOCKED, which would be correct without the
// writer lock too. A trigger NOTIFYs channel climate_events (payload: the schema) when an
// UNDONE event is inserted or moved, and WatchEvents turns that into the engine's Wake,
// so an engine sleeps until its next event yet hears of earlier ones committed by other
// replicas. TryLead elects one replica for maintenance work (such as PruneAllocationLog)
// with a row that expires by the database's clock.
//
// Failure modes: a cancelled context rolls the transaction back (the connection may be
// closed and replaced); a replica that dies holding the writer lock releases it when
// PostgreSQL notices the connection is gone; a lost LISTEN connection is re-established
// with back-off, and the engine is woken after each reconnection because notifications
// sent meanwhile are lost.
package postgres
