// Package notify tells the world what happens to leases. Every lease change and fired event
// is written as an outbox row (climate.Notification) in the transaction of the change
// itself (New builds it); a Worker then sends each row to every destination that accepts
// it (the log, AMQP, webhooks), at least once, in commit order, retrying with backoff.
package notify

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"climate"
	"climate/http/api"
)

// Destination receives notifications. Each has a cursor in the store, named by Name, so it
// advances through the outbox at its own pace: a failing webhook holds back only itself.
type Destination interface {
	// Name identifies the destination's cursor: "log", "amqp", "webhook:<id>".
	Name() string
	// Accepts reports whether the destination wants n (its filter); others are skipped.
	Accepts(n *climate.Notification) bool
	// Deliver sends n. An error means it was not delivered and will be retried (at least
	// once: a delivery that succeeded but was not recorded is repeated, with the same n.ID).
	Deliver(ctx context.Context, n *climate.Notification) error
}

// Replayable is implemented by destinations for which a repeated delivery costs nothing
// (the log): the worker saves their cursor at most once a second, or once a batch (100)
// is owed, instead of after every delivery, so a crash or a takeover repeats at most a
// second's deliveries to them, and never more than two batches.
type Replayable interface {
	Replayable()
}

// Payload is a notification's payload: the lease as the API shows it, with Blazar's
// lease_id key beside id.
type Payload struct {
	LeaseID string `json:"lease_id"`
	api.Lease
	// Preemption, on lease.preempted only, says which hosts are taken back and when.
	Preemption *Preemption `json:"preemption,omitempty"`
}

// Preemption is what a lease.preempted notice tells a preemptible lease: the hosts taken
// back from it within the notice, each with when.
type Preemption struct {
	OnPreempt     string          `json:"on_preempt"`
	NoticeSeconds float64         `json:"notice_seconds"`
	Hosts         []PreemptedHost `json:"hosts"`
}

// PreemptedHost is one host taken back: its id, when, and how long is left until then.
type PreemptedHost struct {
	HostID          string  `json:"host_id"`
	TakenBackAt     string  `json:"taken_back_at"`
	TimeLeftSeconds float64 `json:"time_left_seconds"`
}

// AddPreempted writes the lease.preempted notice of preemptible lease l, due at notice
// before its hosts are taken back: it lists the hosts whose allocation ends within the
// notice from now, before the lease's asked end (each ends there because it is taken
// back), or every host when the lease ends within it (it ends because of a preemption).
func AddPreempted(ctx context.Context, tx climate.Tx, l *climate.Lease, notice time.Duration, now time.Time) error {
	p := &Preemption{OnPreempt: string(l.OnPreempt), NoticeSeconds: notice.Seconds(), Hosts: []PreemptedHost{}}
	for _, r := range l.Reservations {
		for _, a := range r.Allocations {
			if a.End.After(now) && !a.End.After(now.Add(notice)) {
				p.Hosts = append(p.Hosts, PreemptedHost{HostID: a.ResourceID, TakenBackAt: api.FormatTime(a.End), TimeLeftSeconds: a.End.Sub(now).Seconds()})
			}
		}
	}
	n, err := newNotification(climate.NotifyLeasePreempted, l, nil, p, now)
	if err != nil {
		return err
	}
	return tx.AddNotification(ctx, n)
}

// New builds the notification of eventType about l, to be written in the transaction that
// changes l; actionErr, for lease.event.* types, is the failed action's error.
func New(eventType string, l *climate.Lease, actionErr error, now time.Time) (*climate.Notification, error) {
	return newNotification(eventType, l, actionErr, nil, now)
}

func newNotification(eventType string, l *climate.Lease, actionErr error, p *Preemption, now time.Time) (*climate.Notification, error) {
	payload, err := json.Marshal(Payload{LeaseID: l.ID, Lease: api.LeaseOf(l), Preemption: p})
	if err != nil {
		return nil, err
	}
	n := &climate.Notification{ID: climate.NewID(), EventType: eventType, LeaseID: l.ID, ProjectID: l.ProjectID,
		Payload: payload, CreatedAt: now.UTC().Truncate(time.Microsecond)}
	if actionErr != nil {
		// PostgreSQL text cannot hold NUL, and a hook's message might.
		n.Error = strings.ReplaceAll(actionErr.Error(), "\x00", "")
	}
	return n, nil
}

// Add builds the notification of eventType about l and writes it in tx.
func Add(ctx context.Context, tx climate.Tx, eventType string, l *climate.Lease, actionErr error, now time.Time) error {
	n, err := New(eventType, l, actionErr, now)
	if err != nil {
		return err
	}
	return tx.AddNotification(ctx, n)
}
