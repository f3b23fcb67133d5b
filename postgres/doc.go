// Package postgres is Climate's scale-out store: several `climate serve` replicas share one
// PostgreSQL database (each installation in its own schema, chosen by the search_path
// parameter of the URL) and coordinate only through it.
//
// # Concurrent writers
//
// Write transactions (READ COMMITTED) run side by side, across the processes sharing the
// schema; they wait for each other only where they touch the same thing:
//
//   - Resources, by day. A write transaction reads the allocations of the resources it
//     is about to book to re-check them (the manager's ListAllocations with ResourceIDs:
//     its plan still fits, instance slots still fit the host's capacity). In a write
//     transaction that read first takes transaction-scoped advisory locks, in key order,
//     in the same round trip (a pgx batch: each statement of it takes its own snapshot,
//     so the read after the locks sees every commit of the transactions that held them).
//     For a bounded window it locks each resource shared and each (resource, day) the
//     window touches alone; an unbounded window (a host's deletion, healing from now on),
//     or one that would take over 128 such locks (long or large leases: PostgreSQL's lock
//     table is shared), locks the resources alone. Two writers whose windows on a
//     resource overlap share a day of it, so they take turns from the re-check to the
//     commit, exactly as under the single writer before; writers booking other resources,
//     or other days of the same one, do not wait at all (with 3 replicas at 16 clients,
//     waits of over 5 ms on these locks went from 244 to 14 in 600 creations), and an
//     unbounded reader waits for every writer of the resource. Since every re-check holds
//     the locks of what it read to commit, nothing can be booked there between the check
//     and the insert; the other allocation writes outside a re-check only free capacity
//     (ending, shortening, deleting, cutting a preemptible lease). The manager reads the
//     inventory revision after the locks, so a host deleted (which reads its allocations,
//     locking it whole, before it goes) is noticed too. Two locks taken in different
//     orders by one transaction's successive reads may deadlock: PostgreSQL then aborts
//     one, and Update returns climate.ErrConflictRetry, which the manager answers by
//     planning again. The resource's own key is the one earlier versions took alone, so
//     replicas of both kinds still exclude each other during an upgrade.
//   - Leases. A write transaction's GetLease locks the lease's row to commit (FOR NO KEY
//     UPDATE) before reading it, and a claim of due events first locks their leases' rows,
//     in id order: every read-modify-write of one lease (the manager's update or deletion,
//     each event's transitions, a claim) takes its turn, on whichever replica, and reads
//     what the previous one committed. Without it, two replicas' engines handling one
//     lease's start and before_end at the same instant each wrote back the lease as read,
//     and the start's STARTING was lost. Most transactions lock resources, then leases,
//     then projects; one that does otherwise (healing re-checks a lease's new hosts after
//     locking the lease) risks PostgreSQL's deadlock abort, which Update returns as
//     climate.ErrConflictRetry and healing answers by planning again.
//   - Projects with limits. A write that reads a project's limits holds the project's
//     advisory lock shared to commit; setting limits holds it alone, so limits never
//     change under a charge that read them. When limits are checked, the charge folds the
//     project's deltas (below) into its project_charges row with INSERT … ON CONFLICT DO
//     UPDATE, which locks the row to commit: the fair-use checks of one project's
//     concurrent leases (budget, leases and hosts at once) see each other's charges. The
//     charge is a creation's last statement, so the row is held as briefly as can be. A
//     project without limits (or exempt) is not checked: its charges are appended to
//     project_charge_deltas and lock nothing. Its totals are the row plus the deltas, and
//     the maintenance leader folds deltas now and then (FoldProjectCharges).
//   - The allocation revision, for the instant of the commit only. A change to an
//     allocation is logged as it happens with a provisional revision: negative, in a
//     range of the transaction's own, -(xid·2^24 + n) for its n-th change (migration
//     0022). A deferred trigger then runs at commit: it takes the installation's
//     commit-stamp advisory lock, moves meta's allocation_revision past the
//     transaction's n changes and gives them revisions base+1…base+n, reading exactly
//     its own range of the index. The lock is held from there to the end of the commit,
//     all on the server, so revisions are assigned in commit order: a reader that sees
//     revision N has seen every change up to N, and a replica replaying the log never
//     misses one committed "in between". Other transactions' provisional entries are
//     invisible (uncommitted), so neither a reader nor the stamp ever sees them; the
//     ranges only keep the stamp's index walk to its own entries (with one range shared
//     by all, every commit walked the dead entries of every change since the last
//     vacuum: 7 ms a commit after 26,000 changes). A statement's changes are logged
//     by one statement trigger from its transition tables (0027), counted before they
//     are inserted (0028: a stamp run early, by SET CONSTRAINTS … IMMEDIATE, must see
//     them). Only a transaction's first entry (number 1) queues the deferred trigger,
//     which stamps all n. The lock, not meta's row, is what stampers wait for: the
//     lock manager grants it to one waiter at a time in the order they asked, where
//     waiting for the row woke every waiter at each commit to race for it.
//   - The outbox, likewise: a notification's position (Notification.Seq, what delivery
//     cursors keep) is provisional (negative, in the transaction's range) until a
//     deferred trigger gives it its place from meta's outbox_position at commit, under
//     the same lock, so a delivery worker that has read position 8 never misses a 7
//     committed later.
//   - Inventory changes (hosts, properties, floating IPs, maintenance windows) still bump
//     inventory_revision as they happen, holding that row to commit: they are rare, and
//     take turns.
//
// What still serializes every writer is the commit of the counters: a transaction holds
// the commit-stamp lock from its stamp to the end of its commit, which includes the WAL
// flush, so the commits of concurrent writers that changed allocations go one flush at a
// time, and PostgreSQL's group commit (one flush for every commit waiting) never gets a
// second committer (an fdatasync takes 0.1-0.3 ms when the disk is idle, pg_test_fsync;
// on a busy 2-core machine 663 flushes for 600 creations took 2.3 ms each, and 13 of 16
// writers were waiting for the lock). Everything before the commit runs side by side, so
// with a database a round trip away concurrent writers still scale somewhat (bench api
// --database-delay). On the project's 2-core machine, where the servers, PostgreSQL and
// the clients share the cores, the waits are a symptom rather than the limit: with three
// replicas the writers waited 53 ms on the lock for each creation (2 ms with one), yet an
// experiment that took every flush out from under it (a commit only queued its stamp, and
// a statement sent after COMMIT stamped all the queued ones, one flush for many commits)
// was no faster, and neither was a log keyed by commit (the stamp inserting one row
// instead of rewriting the commit's entries, which every read then had to join):
// docs/performance-log.md's eleventh session has the figures. Removing this last step
// means giving up numbers assigned in commit order for a cursor PostgreSQL can answer
// without a lock: log each change with its transaction's id (pg_current_xact_id) and a
// sequence number taken as it is logged, and let a reader's cursor be the largest
// sequence number it has read with the transactions its read's snapshot saw in progress
// (pg_current_snapshot's xip). A change the cursor has not read is then either after that
// number, or logged by one of those transactions, which were still running when the
// read's snapshot was taken (a change numbered before one the read saw was logged before
// that one committed), so the next read is "sequence after the number, or transaction
// among those", two index ranges, in one statement whose snapshot makes the next cursor:
// every change is read exactly once, however commits interleave, and no reader rescans
// from an old xmin. The planner's revision comparisons, its pending commits and
// applied-change checks, and the delivery cursors, would move from numbers to such
// cursors.
//
// The audit trail's id is still taken when the row is inserted: a reader paging it while
// writes are under way may not see an entry with a lower id committed after the page.
//
// A writer's own commit does not move AllocationRevision inside its transaction (its
// changes are stamped at commit; the Store says so, climate.CommitStamped, and the
// manager reads none there), so the manager brings its availability index up to date
// from the log on its next request, like a replica does with other replicas' writes.
// Within a process, Updates queue for writer goroutines, one for each pooled connection
// but four kept for reads, so writers waiting for locks never take every connection away
// from Views. The pool's default size, eight, leaves four writers a process: more would
// only queue on the commit stamp, where a wait costs PostgreSQL far more (defaultMaxConns
// gives the figures); pool_max_conns in the URL sets it. A database farDatabase or more
// away as the store opens gets twenty, sixteen writers (farMaxConns): there round trips,
// not the stamp, bound the writers. The stamp is the installation's,
// so the replicas that serve share their writers (ShareWriters, replicas.go): each counts
// the others through the replicas table and lets only its writers over that count take
// new Updates, so the waiting Updates make larger batches for the writers at work. A
// database farDatabase (5 ms) or more away is not shared: there round trips, not the
// stamp, bound the writers, and a replica that gave some up would lose their throughput
// (behind 10 ms three sharing replicas made fewer creations than one); only beyond three
// replicas does each keep fewer at work (farWriters), to bound their connections.
//
// # Group commit
//
// Each writer runs the Updates that queued while it was busy in one transaction, each in
// a savepoint (batch.go): they share BEGIN, COMMIT with its WAL flush and stamp, and the
// log's read-back, which under load were most of a write's cost. A request's re-check
// sees the requests before it in the batch, and their locks are its own; a request that
// fails rolls back to its savepoint alone. Correctness rests on the same locks as above,
// held to the batch's commit. The new hazard is a cycle of waits between batches, each
// holding its earlier requests' locks, which PostgreSQL would break only after
// deadlock_timeout by aborting a whole batch: so a batch's later requests wait for a lock
// at most laterLockTimeout (lock_timeout), then give up their place, are rolled back to
// their savepoints, and run first in the writer's next batch, waiting as a lone
// transaction does. Every cycle then holds a request that gives up. A transaction that
// fails as a whole (a held statement, perhaps another request's, or COMMIT: a deferred
// constraint) reruns its requests alone.
//
// # Round trips
//
// An Update runs on one connection through a pipe (pipe.go) rather than a pgx.Tx: BEGIN
// goes with the transaction's first statement, and the writes whose only answer is an
// error (a lease's rows, whose ids are new; audit entries, notifications, usage records,
// charge deltas) are held back and sent with the next statement, in one pgx batch, or
// with COMMIT. The manager reads no allocation revision in a write transaction (the
// Store is climate.CommitStamped: its own changes are stamped at commit anyway), and the
// inventory revision comes in the batch that locks the chosen resources. A lease
// creation is three round trips: BEGIN with the resources' locks, their allocations and
// the inventory revision; the lease's rows, the audit entry and the notification with
// the project's limits; the usage records and the charge with COMMIT. The resources are
// held for all three. A held statement that fails (a taken id) aborts the transaction,
// and the statement it went with (or COMMIT) returns its error, so nothing is written, as
// when each went alone. The manager's commits also read the allocation log after its
// index's revision, sent after COMMIT in its round trip (UpdateThenChanges,
// climate.CommitReader): PostgreSQL runs it once the commit is done, so it reads the
// commit's stamped entries, and the index is current as of the commit. The revision is
// taken just before COMMIT is sent, so what other batches' reads caught up meanwhile is
// not read again, and a batch reads once for all its requests. A manager has one such
// read in flight at a time: a commit sent meanwhile reads nothing, and keeps what it
// wrote among the hosts plans steer clear of until a later read brings it (side by side,
// reads from the same revision brought each change many times over). A plan within a
// second of that (manager.trustIndexFor) skips the view's revision check, so under load
// an API creation is the write transaction's three round trips. An idle API server checks
// its index every half second (manager.KeepFresh), so it stays trusted there too; a
// manager without that checks first (four). A plan another replica's commit made stale
// fails the re-check and is made again on a checked view, as is a refusal. The answer
// names the hosts from the planning view (climate.Lease.Names), with no read after the
// commit.
//
// # The exclusion constraints
//
// The invariant that matters most, no resource double-booked, is also stated to the
// database. An allocation holds either the whole resource (slots = 0) or some instance
// slots of a shared host (slots > 0); two allocations of one resource whose times
// overlap conflict unless both hold slots. One constraint says so (migrations 0024, 0025):
//
//	allocations_no_double_booking EXCLUDE USING gist (hashtextextended(resource_id, 0) WITH =,
//	    tstzrange(start_at, end_at, '[)') WITH &&,
//	    (CASE WHEN slots = 0 THEN int8range(NULL, NULL)
//	          ELSE int8range(hashtextextended(id, 0), hashtextextended(id, 0), '[]') END) WITH &&)
//
// DEFERRABLE INITIALLY DEFERRED. Resources are compared by their ids' 64-bit hashes,
// which GiST indexes at about a third of the cost of the text (0025). In the third column
// a whole-resource allocation covers every number and a slot allocation only its id's
// hash, so a whole one overlaps everything there and two slot ones only if their ids'
// hashes collide. A collision of either hash refuses a valid write as a conflict
// (re-planned) and never lets an overlap through. That slot
// allocations fit the host's capacity is not a constraint but the manager's re-check
// under the resource locks. (Until 0024 these were two constraints, whole against whole
// and whole against slots: each GiST index cost about 0.4 ms of a 10-host creation.)
//
// With the resource locks, the manager's re-check already prevents overlaps, so the
// constraint normally never fires. It is there so the invariant holds even if
// application code is wrong (a bug in planning or re-checking, a store method misused, a
// manual SQL fix): such a write fails at COMMIT with SQLSTATE 23P01, which Update returns
// wrapping climate.ErrConflictRetry, so the manager re-plans
// instead of double booking. It is deferred so that a lease update rewriting its own
// rows is judged on the final state. It needs the btree_gist extension, which Open
// creates in public (never in an installation's schema: dropping one installation must
// not drop what the others use).
//
// # Reads, events, replicas
//
// View is a read-only REPEATABLE READ transaction: one snapshot, and writes fail. Due
// events are claimed with FOR UPDATE SKIP LOCKED under their leases' locks. A trigger
// NOTIFYs channel climate_events when UNDONE events are inserted (once per statement,
// with the earliest due time and the schema) or one is moved (its due time), and when the
// outbox is written ("outbox" and the schema).
// WatchEvents passes over what this store's own connections notified and turns the rest
// into the engine's WakeFor, so an engine sleeps until its next event yet hears of
// earlier ones committed by other replicas. TryLead elects one replica for maintenance
// work (such as PruneAllocationLog) with a row that expires by the database's clock.
//
// Failure modes: a cancelled context rolls the transaction back (the connection may be
// closed and replaced); a replica that dies holding locks releases them when
// PostgreSQL notices the connection is gone; a lost LISTEN connection is re-established
// with back-off, and the engine is woken after each reconnection because notifications
// sent meanwhile are lost.
package postgres
