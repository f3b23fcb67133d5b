package climate

import (
	"context"
	"time"
)

// Webhook is a URL subscribed to notifications (Climate's extension): a project's leases',
// or, created by an admin with AllProjects, every lease's. Each delivery is signed with
// Secret, which the API shows once, at creation.
type Webhook struct {
	ID string
	// ProjectID is the project whose leases' notifications the webhook receives (and the
	// project that owns it); empty when AllProjects.
	ProjectID   string
	AllProjects bool
	UserID      string // who created it
	URL         string
	// EventTypes are the notification types wanted (lease.create, lease.event.start_lease,
	// …); empty means all.
	EventTypes []string
	Secret     string
	// Enabled is false once deliveries kept failing (DisabledReason says why) or an owner
	// disabled it; a disabled webhook receives nothing until enabled again.
	Enabled        bool
	DisabledReason string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Destination is the name of a webhook's delivery cursor.
func (w *Webhook) Destination() string { return "webhook:" + w.ID }

// Wants reports whether the webhook receives n: its project's lease (any with
// AllProjects) and a wanted event type.
func (w *Webhook) Wants(n *Notification) bool {
	if !w.AllProjects && n.ProjectID != w.ProjectID {
		return false
	}
	if len(w.EventTypes) == 0 {
		return true
	}
	for _, t := range w.EventTypes {
		if t == n.EventType {
			return true
		}
	}
	return false
}

// Delivery states of a WebhookDelivery.
const (
	DeliveryDelivered = "delivered" // the receiver answered 2xx
	DeliveryRetrying  = "retrying"  // failed so far; tried again later
	DeliveryFailed    = "failed"    // given up on
)

// WebhookDelivery is where one notification's delivery to a webhook stands: its last
// attempt's outcome and how many attempts it took.
type WebhookDelivery struct {
	WebhookID      string
	NotificationID string // the delivery id receivers de-duplicate on
	Seq            int64
	EventType      string
	LeaseID        string
	Status         string
	Attempts       int
	// ResponseCode is the receiver's last HTTP status; 0 when it did not answer.
	ResponseCode   int
	LastError      string
	FirstAttemptAt time.Time
	LastAttemptAt  time.Time
}

// Webhook limits.
const (
	// MaxWebhookURLLength bounds a webhook's URL.
	MaxWebhookURLLength = 2048
	// MaxWebhookEventTypes bounds a webhook's event type filter.
	MaxWebhookEventTypes = 16
	// MaxWebhooksPerProject bounds the webhooks of one project, and the all-project ones.
	MaxWebhooksPerProject = 25
	// WebhookDeliveriesKept is how many of its latest deliveries a webhook keeps.
	WebhookDeliveriesKept = 100
)

// WebhookStore is the part of a Tx that keeps webhooks and their latest deliveries.
type WebhookStore interface {
	// InsertWebhook writes a new webhook (w.ID set by the caller).
	InsertWebhook(ctx context.Context, w *Webhook) error
	// GetWebhook returns a webhook; CodeNotFound when there is none.
	GetWebhook(ctx context.Context, id string) (*Webhook, error)
	// ListWebhooks returns webhooks in creation order (then id): those of projectID or,
	// with projectID empty, all of them (all-project ones have no project).
	ListWebhooks(ctx context.Context, projectID string) ([]Webhook, error)
	// UpdateWebhook rewrites a webhook's URL, event types, enabled state, disabled reason
	// and UpdatedAt; CodeNotFound when it is gone.
	UpdateWebhook(ctx context.Context, w *Webhook) error
	// DeleteWebhook deletes a webhook and its deliveries; CodeNotFound when there is none.
	DeleteWebhook(ctx context.Context, id string) error
	// RecordWebhookDelivery writes d, replacing the webhook's row for the same
	// notification, and keeps only the webhook's WebhookDeliveriesKept latest (by Seq).
	// A webhook that is gone is not an error: nothing is written.
	RecordWebhookDelivery(ctx context.Context, d *WebhookDelivery) error
	// WebhookDeliveries returns a webhook's deliveries, latest (highest Seq) first, at
	// most limit of them.
	WebhookDeliveries(ctx context.Context, webhookID string, limit int) ([]WebhookDelivery, error)
}

// WebhookRequest asks for a webhook.
type WebhookRequest struct {
	URL        string
	EventTypes []string
	// ProjectID names the project whose leases are wanted (default: the caller's; another
	// project's needs admin). AllProjects (admin) subscribes to every project's leases.
	ProjectID   string
	AllProjects bool
	// Secret, when given, is the signing secret (so a receiver configured beforehand can
	// verify even the creation's test delivery); otherwise one is generated.
	Secret string
}

// Webhook secret lengths, when a client chooses the secret.
const (
	MinWebhookSecretLength = 16
	MaxWebhookSecretLength = 256
)

// WebhookUpdate changes a webhook; nil fields keep their value. Enabling a disabled
// webhook clears its reason; deliveries resume from where they stopped.
type WebhookUpdate struct {
	URL        *string
	EventTypes *[]string
	Enabled    *bool
}

// WebhookService is what the API offers on webhooks.
type WebhookService interface {
	// CreateWebhook checks the URL (a public address unless the operator allows private
	// ones) and subscribes it; the returned webhook holds its Secret, shown only now.
	CreateWebhook(ctx context.Context, who Identity, req WebhookRequest) (*Webhook, error)
	// GetWebhook, ListWebhooks and the rest never return the secret.
	GetWebhook(ctx context.Context, who Identity, id string) (*Webhook, error)
	ListWebhooks(ctx context.Context, who Identity) ([]Webhook, error)
	UpdateWebhook(ctx context.Context, who Identity, id string, u WebhookUpdate) (*Webhook, error)
	DeleteWebhook(ctx context.Context, who Identity, id string) error
	// WebhookDeliveries returns the webhook's latest deliveries, latest first.
	WebhookDeliveries(ctx context.Context, who Identity, id string, limit int) ([]WebhookDelivery, error)
}
