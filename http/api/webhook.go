package api

import "climate"

// Webhook is a webhook as the API shows it (Climate's extension): a URL subscribed to a
// project's lease notifications (or, AllProjects, every project's).
type Webhook struct {
	ID string `json:"id"`
	// ProjectID is the project whose leases' notifications the webhook receives; empty
	// when AllProjects.
	ProjectID   string `json:"project_id"`
	AllProjects bool   `json:"all_projects"`
	UserID      string `json:"user_id"`
	URL         string `json:"url"`
	// EventTypes are the notification types wanted: [] means all.
	EventTypes []string `json:"event_types"`
	// Enabled is false once an owner disabled the webhook or deliveries kept failing
	// (DisabledReason says which).
	Enabled        bool   `json:"enabled"`
	DisabledReason string `json:"disabled_reason"`
	CreatedAt      string `json:"created_at"`
	UpdatedAt      string `json:"updated_at"`
	// Secret signs deliveries (the Climate-Signature header); only the answer to the
	// webhook's creation carries it.
	Secret string `json:"secret,omitempty"`
}

// WebhookDelivery is where one notification's delivery to a webhook stands.
type WebhookDelivery struct {
	// NotificationID is the delivery id (the Climate-Delivery header) receivers
	// de-duplicate on.
	NotificationID string `json:"notification_id"`
	Seq            int64  `json:"seq"`
	EventType      string `json:"event_type"`
	LeaseID        string `json:"lease_id"`
	// Status is delivered, retrying or failed.
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	// ResponseCode is the receiver's last HTTP status; 0 when it did not answer.
	ResponseCode   int    `json:"response_code"`
	LastError      string `json:"last_error"`
	FirstAttemptAt string `json:"first_attempt_at"`
	LastAttemptAt  string `json:"last_attempt_at"`
}

// WebhookRequest creates a webhook: POST /v1/webhooks. Only URL is required.
type WebhookRequest struct {
	URL string `json:"url"`
	// EventTypes narrows the notifications sent (lease.create, lease.event.start_lease,
	// …); empty means all.
	EventTypes []string `json:"event_types,omitempty"`
	// ProjectID is the project whose leases are wanted (default: the caller's; another
	// project's needs admin); AllProjects (admins) subscribes to every project's.
	ProjectID   string `json:"project_id,omitempty"`
	AllProjects bool   `json:"all_projects,omitempty"`
	// Secret is the signing secret (16 to 256 printable ASCII characters); empty: the
	// server generates one.
	Secret string `json:"secret,omitempty"`
}

// WebhookUpdate changes a webhook: PUT /v1/webhooks/{id}. Nil fields are left as they
// are; EventTypes pointing to an empty list subscribes to every type.
type WebhookUpdate struct {
	URL        *string   `json:"url,omitempty"`
	EventTypes *[]string `json:"event_types,omitempty"`
	Enabled    *bool     `json:"enabled,omitempty"`
}

// WebhookOf is w as the API shows it, without its secret: the answer to its creation
// adds that.
func WebhookOf(w *climate.Webhook) Webhook {
	types := make([]string, len(w.EventTypes))
	copy(types, w.EventTypes)
	return Webhook{ID: w.ID, ProjectID: w.ProjectID, AllProjects: w.AllProjects, UserID: w.UserID, URL: w.URL,
		EventTypes: types, Enabled: w.Enabled, DisabledReason: w.DisabledReason,
		CreatedAt: FormatTime(w.CreatedAt), UpdatedAt: FormatTime(w.UpdatedAt)}
}

// WebhookDeliveryOf is d as the API shows it.
func WebhookDeliveryOf(d *climate.WebhookDelivery) WebhookDelivery {
	return WebhookDelivery{NotificationID: d.NotificationID, Seq: d.Seq, EventType: d.EventType, LeaseID: d.LeaseID,
		Status: d.Status, Attempts: d.Attempts, ResponseCode: d.ResponseCode, LastError: d.LastError,
		FirstAttemptAt: FormatTime(d.FirstAttemptAt), LastAttemptAt: FormatTime(d.LastAttemptAt)}
}
