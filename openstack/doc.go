// Package openstack is the OpenStack driver: the side effects of lease events on Nova,
// exactly as Blazar's physical:host plugin has them, so that Blazar's scheduler filter
// (blazar-nova's BlazarFilter) and its users' habits work unchanged.
//
// A physical:host reservation owns a Nova host aggregate named after the reservation id,
// in the availability zone "blazar_<reservation id>", with metadata blazar:owner = the
// lease's project. At the lease's start each reserved host leaves the "freepool"
// aggregate (where BlazarFilter refuses every boot) for that aggregate (where it admits
// boots with the scheduler hint reservation=<reservation id> from the owner's project).
// At the end every server on those hosts is deleted, the driver waits until they are
// gone, the hosts go back to the freepool and the aggregate is deleted.
//
// Blazar creates the aggregate when the lease is created; here it is made at the start,
// since the engine's actions are the driver's only seam (so, before the start, Nova has
// no aggregate for the reservation).
//
// Failure modes. Delivery is at least once: an engine that dies mid-action is taken over
// and the action runs again, so every step reads Nova's state first and does only what
// is missing, in an order whose every intermediate state the next run can finish from:
// a host joins the reservation's aggregate before it leaves the freepool (in both, it is
// bookable by the hint only), and goes back to the freepool before it leaves the
// reservation's aggregate. A failed call is retried with backoff when it may succeed
// later (transport errors, 5xx, 429); otherwise the action fails with Nova's message,
// and the engine puts the lease into ERROR. A start that fails gives the hosts it moved
// back to the freepool.
package openstack
