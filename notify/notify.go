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

// Payload is a notification's payload: the lease as the API shows it, with Blazar's
// lease_id key beside id.
type Payload struct {
	LeaseID string `json:"lease_id"`
	api.Lease
}

// New builds the notification of eventType about l, to be written in the transaction that
// changes l; actionErr, for lease.event.* types, is the failed action's error.
func New(eventType string, l *climate.Lease, actionErr error, now time.Time) (*climate.Notification, error) {
	payload, err := json.Marshal(Payload{LeaseID: l.ID, Lease: api.LeaseOf(l)})
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
