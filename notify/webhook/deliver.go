package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"climate"
	"climate/http/api"
	"climate/notify"
)

// DefaultTimeout bounds one delivery attempt: connecting, sending and the answer.
const DefaultTimeout = 10 * time.Second

// Sender posts signed deliveries to webhooks, only to addresses its Guard allows.
type Sender struct {
	client  *http.Client
	clock   climate.Clock
	timeout time.Duration
}

// NewSender returns a sender whose attempts each take at most timeout (0: DefaultTimeout).
func NewSender(g Guard, clock climate.Clock, timeout time.Duration) *Sender {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := &net.Dialer{Timeout: timeout, Control: g.Control}
	transport := &http.Transport{
		Proxy:                 nil, // never the environment's proxy: it would dial for us, past the guard
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &Sender{clock: clock, timeout: timeout, client: &http.Client{
		Transport: transport,
		Timeout:   timeout,
		// A redirect could lead anywhere, past the URL's check: it is the answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// ResponseError is a delivery the receiver answered with a status other than 2xx.
type ResponseError struct {
	Code int
	Body string // the start of the answer, for the delivery's record
}

func (e *ResponseError) Error() string {
	msg := fmt.Sprintf("receiver answered %d %s", e.Code, http.StatusText(e.Code))
	if e.Code >= 300 && e.Code < 400 {
		msg += " (redirects are not followed)"
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Send posts body to w's URL, signed with its secret, as delivery id of type event. It
// returns the receiver's status code (0 when it did not answer) and, unless that is 2xx,
// an error that says what went wrong, without the URL's query (it may hold a token).
func (s *Sender) Send(ctx context.Context, w *climate.Webhook, id, event string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("bad webhook URL: %v", err)
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Climate-Webhook/1")
	now := s.clock.Now()
	h.Set(SignatureHeader, Sign(w.Secret, now, body))
	h.Set(StandardIDHeader, id)
	h.Set(StandardTimestampHeader, strconv.FormatInt(now.Unix(), 10))
	h.Set(StandardSignatureHeader, StandardSignature(w.Secret, id, now, body))
	h.Set(DeliveryHeader, id)
	h.Set(EventHeader, event)
	h.Set(WebhookHeader, w.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, s.describe(err)
	}
	defer resp.Body.Close()
	start, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, &ResponseError{Code: resp.StatusCode, Body: strings.Join(strings.Fields(strings.ToValidUTF8(string(start), "?")), " ")}
	}
	return resp.StatusCode, nil
}

// describe turns a client error into a message without the URL.
func (s *Sender) describe(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var te interface{ Timeout() bool }
	if (errors.As(err, &te) && te.Timeout()) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v", s.timeout)
	}
	return err
}

// Destinations returns the enabled webhooks as notification destinations, read from st
// on every call (notify.Config.Destinations), with giveUpAfter for their disabled reason.
func (s *Sender) Destinations(st climate.Store, giveUpAfter time.Duration) func(context.Context) ([]notify.Destination, error) {
	return func(ctx context.Context) ([]notify.Destination, error) {
		var hooks []climate.Webhook
		if err := st.View(ctx, func(tx climate.Tx) (err error) {
			hooks, err = tx.ListWebhooks(ctx, "")
			return err
		}); err != nil {
			return nil, err
		}
		var out []notify.Destination
		for i := range hooks {
			if hooks[i].Enabled {
				out = append(out, &destination{w: hooks[i], s: s, giveUpAfter: giveUpAfter})
			}
		}
		return out, nil
	}
}

// destination delivers to one webhook and records each attempt in its deliveries.
type destination struct {
	w           climate.Webhook
	s           *Sender
	giveUpAfter time.Duration

	// The last answer, for Record: the worker delivers one notification at a time.
	mu       sync.Mutex
	lastID   string
	lastCode int
}

func (d *destination) Name() string                         { return d.w.Destination() }
func (d *destination) Accepts(n *climate.Notification) bool { return d.w.Wants(n) }

// Deliver posts n as the event stream shows it (api.Notification).
func (d *destination) Deliver(ctx context.Context, n *climate.Notification) error {
	body, err := json.Marshal(api.NotificationOf(n))
	if err != nil {
		return err
	}
	code, err := d.s.Send(ctx, &d.w, n.ID, n.EventType, body)
	d.mu.Lock()
	d.lastID, d.lastCode = n.ID, code
	d.mu.Unlock()
	return err
}

// Record writes the attempt into the webhook's deliveries and, when the notification was
// given up on, disables the webhook with the reason: it has failed for giveUpAfter.
func (d *destination) Record(ctx context.Context, tx climate.Tx, a notify.Attempt) error {
	n := &a.Notification
	code := 0
	d.mu.Lock()
	if d.lastID == n.ID {
		code = d.lastCode
	}
	d.mu.Unlock()
	rec := climate.WebhookDelivery{WebhookID: d.w.ID, NotificationID: n.ID, Seq: n.Seq, EventType: n.EventType,
		LeaseID: n.LeaseID, Status: climate.DeliveryDelivered, Attempts: a.Number, ResponseCode: code,
		FirstAttemptAt: a.Started, LastAttemptAt: a.At}
	if a.Number > 1 {
		if prev, err := tx.WebhookDeliveries(ctx, d.w.ID, 1); err != nil {
			return err
		} else if len(prev) == 1 && prev[0].NotificationID == n.ID {
			rec.FirstAttemptAt = prev[0].FirstAttemptAt
		}
	}
	if a.Err != nil {
		rec.Status, rec.LastError = climate.DeliveryRetrying, a.Err.Error()
		if a.GaveUp {
			rec.Status = climate.DeliveryFailed
		}
	}
	if err := tx.RecordWebhookDelivery(ctx, &rec); err != nil {
		return err
	}
	if !a.GaveUp {
		return nil
	}
	w, err := tx.GetWebhook(ctx, d.w.ID)
	if climate.ErrorCode(err) == climate.CodeNotFound {
		return nil // deleted meanwhile
	} else if err != nil {
		return err
	}
	before := *w
	w.Enabled = false
	w.DisabledReason = fmt.Sprintf("disabled at %s: notification %s (%s) could not be delivered for %v (%d attempts); last error: %s",
		api.FormatTime(a.At), n.ID, n.EventType, d.giveUpAfter, a.Number, rec.LastError)
	w.UpdatedAt = a.At.UTC().Truncate(time.Microsecond)
	if err := tx.UpdateWebhook(ctx, w); err != nil {
		return err
	}
	return audit(ctx, tx, climate.BySystem("deliveries kept failing: webhook disabled"), "webhook.update", &before, w, a.At)
}
