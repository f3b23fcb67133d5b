package climate

import (
	"context"
	"slices"
	"time"
)

// Notification is one thing that happened to a lease, as the world hears of it: a lease
// change (lease.create, lease.update, lease.delete) or a fired event (lease.event.<type>,
// with Error set when its action failed). It is written as an outbox row in the same
// transaction as the change it reports, so no notification exists for a change that rolled
// back and none is lost when a process dies after the commit.
type Notification struct {
	// Seq is assigned by the store at insert: it increases in commit order (writers are
	// serialized), so destinations deliver in that order.
	Seq int64
	// ID is unique; receivers de-duplicate redeliveries on it.
	ID        string
	EventType string
	LeaseID   string
	ProjectID string
	// Payload is the lease as the API shows it (Blazar's notification payload), JSON.
	Payload []byte
	// Error is the failed action's message, for lease.event.* notifications.
	Error     string
	CreatedAt time.Time
}

// Notification event types for lease changes.
const (
	NotifyLeaseCreate = "lease.create"
	NotifyLeaseUpdate = "lease.update"
	NotifyLeaseDelete = "lease.delete"
	// NotifyLeasePreempted: hosts of a preemptible lease are taken back (at its
	// preempt_lease event, a notice ahead); its payload's preemption says which and when.
	NotifyLeasePreempted = "lease.preempted"
)

// NotifyEvent is the notification type of a fired event: lease.event.<type>.
func NotifyEvent(t EventType) string { return "lease.event." + string(t) }

// NotificationTypes returns every notification type, the names filters may use.
func NotificationTypes() []string {
	out := []string{NotifyLeaseCreate, NotifyLeaseUpdate, NotifyLeaseDelete, NotifyLeaseDegraded, NotifyLeaseHealed, NotifyLeasePreempted}
	for _, t := range []EventType{EventStartLease, EventEndLease, EventBeforeEndLease, EventBeforeStartLease, EventRetryDeadline} {
		out = append(out, NotifyEvent(t))
	}
	return out
}

// KnownNotificationType reports whether t is a notification type.
func KnownNotificationType(t string) bool { return slices.Contains(NotificationTypes(), t) }

// DeliveryCursor is how far one destination (the log, AMQP, a webhook) has got through
// the outbox: it receives notifications in Seq order, one at a time, retrying the next
// until it is delivered or given up on.
type DeliveryCursor struct {
	Destination string
	// Position is the Seq of the last notification delivered or given up on.
	Position int64
	// Attempts counts failed attempts at the notification after Position.
	Attempts int
	// NextAttempt is when to try again after a failure (zero: at once).
	NextAttempt time.Time
	LastError   string
	UpdatedAt   time.Time
}

// Outbox is the part of a Tx that keeps notifications and the destinations' progress.
type Outbox interface {
	// AddNotification writes n. Its Seq, the position destinations keep cursors on, is
	// in commit order: SQLite (one writer) assigns it here, PostgreSQL at commit.
	AddNotification(ctx context.Context, n *Notification) error
	// Notifications returns up to limit notifications with Seq > after, in Seq order.
	Notifications(ctx context.Context, after int64, limit int) ([]Notification, error)
	// LastNotificationSeq returns the highest Seq written, 0 when none.
	LastNotificationSeq(ctx context.Context) (int64, error)
	// DeliveryCursor returns a destination's cursor; ok is false when it has none yet.
	DeliveryCursor(ctx context.Context, destination string) (c DeliveryCursor, ok bool, err error)
	// SaveDeliveryCursor writes a cursor (creating it). Its Position never moves back: a
	// stale writer's older position is ignored, so a takeover redelivers, never skips.
	SaveDeliveryCursor(ctx context.Context, c *DeliveryCursor) error
	// DeleteDeliveryCursor forgets a destination's cursor (a deleted webhook's); none is
	// not an error.
	DeleteDeliveryCursor(ctx context.Context, destination string) error
}
