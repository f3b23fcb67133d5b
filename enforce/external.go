// Package enforce asks an operator's service whether a lease may be created or changed:
// Blazar's ExternalServiceFilter contract. The service gets a JSON POST at
// BASE/check-create ({"context", "lease"}) or BASE/check-update ({"context",
// "current_lease", "lease"}); 204 allows, 403 with {"message": "…"} refuses with that
// message, and any other answer refuses with Blazar's generic message.
package enforce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"climate"
	"climate/http/api"
)

// DeniedMessage is Blazar's message for a refusal without one of the service's own.
const DeniedMessage = "External service enforcement filter denied the request."

// External is the operator's service.
type External struct {
	// Base is the service's URL; the endpoints are Base+"/check-create" and
	// Base+"/check-update".
	Base string
	// Token, when set, is sent as X-Auth-Token (a secret: never logged).
	Token string
	// Timeout bounds one call (default 5 s).
	Timeout time.Duration
	// FailOpen allows what the service did not answer about in time (or at all); by
	// default such a request is refused with a 503.
	FailOpen bool
	// Client makes the calls; nil: a client of its own.
	Client *http.Client
}

// CheckCreate asks whether who may create l (checked before it is planned, so its
// reservations have no allocations yet).
func (e *External) CheckCreate(ctx context.Context, who climate.Identity, l *climate.Lease) error {
	return e.call(ctx, "/check-create", map[string]any{"context": contextOf(who), "lease": api.LeaseOf(l)})
}

// CheckUpdate asks whether who may change cur into l.
func (e *External) CheckUpdate(ctx context.Context, who climate.Identity, cur, l *climate.Lease) error {
	return e.call(ctx, "/check-update", map[string]any{"context": contextOf(who), "current_lease": api.LeaseOf(cur), "lease": api.LeaseOf(l)})
}

// contextOf is Blazar's filter context: who asks (Climate knows no auth_url or region).
func contextOf(who climate.Identity) map[string]string {
	return map[string]string{"user_id": who.UserID, "project_id": who.ProjectID}
}

func (e *External) call(ctx context.Context, endpoint string, body any) error {
	status, data, err := e.post(ctx, endpoint, body)
	if err != nil {
		if e.FailOpen {
			return nil
		}
		return climate.Errorf(climate.CodeUnavailable, "The external enforcement service %s; the request is refused until it answers", err)
	}
	switch status {
	case http.StatusNoContent:
		return nil
	case http.StatusForbidden:
		var denial struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &denial) == nil && denial.Message != "" {
			return climate.Errorf(climate.CodeForbidden, "%s", denial.Message)
		}
	}
	return climate.Errorf(climate.CodeForbidden, "%s", DeniedMessage)
}

// post sends body to the endpoint and returns the answer's status and (the start of) its
// body; err says, for a service that did not answer, how it did not.
func (e *External) post(ctx context.Context, endpoint string, body any) (status int, data []byte, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(e.Base, "/")+endpoint, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if e.Token != "" {
		req.Header.Set("X-Auth-Token", e.Token)
	}
	client := e.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var urlErr interface{ Timeout() bool }
		if errors.As(err, &urlErr) && urlErr.Timeout() {
			return 0, nil, fmt.Errorf("did not answer within %s", timeout)
		}
		return 0, nil, errors.New("did not answer")
	}
	defer resp.Body.Close()
	data, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, data, nil
}

// OnEnd tells the service of each lease that ended (POST BASE/on-end with {"context",
// "lease"}, as Blazar's filter's on_end). It is a notification destination
// (notify.Destination): it gets every lease.event.end_lease at least once, in order,
// retried with backoff like any destination.
type OnEnd struct{ *External }

// Name is its delivery cursor's name.
func (OnEnd) Name() string { return "external-filter" }

// Accepts takes the lease ends only.
func (OnEnd) Accepts(n *climate.Notification) bool {
	return n.EventType == climate.NotifyEvent(climate.EventEndLease)
}

// Deliver posts n's lease; an answer other than 2xx, or none, is retried.
func (o OnEnd) Deliver(ctx context.Context, n *climate.Notification) error {
	var lease map[string]any
	if err := json.Unmarshal(n.Payload, &lease); err != nil {
		return err
	}
	user, _ := lease["user_id"].(string)
	status, _, err := o.post(ctx, "/on-end", map[string]any{"context": map[string]string{"user_id": user, "project_id": n.ProjectID}, "lease": lease})
	if err != nil {
		return fmt.Errorf("the external filter %w", err)
	}
	if status < 200 || status > 299 {
		return fmt.Errorf("the external filter answered %d to on-end", status)
	}
	return nil
}
