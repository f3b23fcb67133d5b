package api

import (
	"encoding/json"
	"fmt"

	"climate"
)

// Notification is one notification as the event stream (GET /v1/events/stream) sends it
// in an event's data: Climate's extension.
type Notification struct {
	// Seq is the notification's position in the outbox, also the event's id: a client
	// resumes after it (Last-Event-ID).
	Seq       int64  `json:"seq"`
	ID        string `json:"id"`
	EventType string `json:"event_type"`
	LeaseID   string `json:"lease_id"`
	ProjectID string `json:"project_id"`
	CreatedAt string `json:"created_at"`
	// Payload is the lease as the API showed it when the notification was written, with
	// Blazar's lease_id key beside id.
	Payload json.RawMessage `json:"payload"`
	// Error is the failed action's message, for lease.event.* notifications.
	Error string `json:"error,omitempty"`
}

// NotificationOf returns n's wire shape.
func NotificationOf(n *climate.Notification) Notification {
	payload := json.RawMessage(n.Payload)
	if !json.Valid(payload) {
		payload = json.RawMessage("null")
	}
	return Notification{Seq: n.Seq, ID: n.ID, EventType: n.EventType, LeaseID: n.LeaseID, ProjectID: n.ProjectID,
		CreatedAt: FormatTime(n.CreatedAt), Payload: payload, Error: n.Error}
}

// Lease decodes the payload: the lease as it was when n was written.
func (n *Notification) Lease() (*Lease, error) {
	var l Lease
	if err := json.Unmarshal(n.Payload, &l); err != nil {
		return nil, fmt.Errorf("notification %d (%s): payload is not a lease: %v", n.Seq, n.EventType, err)
	}
	return &l, nil
}
