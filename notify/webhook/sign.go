package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a webhook delivery.
const (
	// SignatureHeader carries "t=UNIX_SECONDS,v1=HEX": HMAC-SHA256 with the webhook's
	// secret over "UNIX_SECONDS.BODY", as Stripe signs (the timestamp bounds replays).
	SignatureHeader = "Climate-Signature"
	// DeliveryHeader is the notification's id: the same on every retry, so receivers
	// de-duplicate on it.
	DeliveryHeader = "Climate-Delivery"
	// EventHeader is the notification's type (lease.event.start_lease, …, or webhook.ping).
	EventHeader = "Climate-Event"
	// WebhookHeader is the id of the webhook delivering.
	WebhookHeader = "Climate-Webhook"
)

// PingEvent is the type of the test delivery sent when a webhook is created.
const PingEvent = "webhook.ping"

// NewSecret returns a new signing secret: 32 random bytes, hex, with a prefix that tells
// what it is when it turns up somewhere.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "whsec_" + hex.EncodeToString(b)
}

// Sign returns the SignatureHeader value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is returned by Verify for a delivery not signed with the secret.
var ErrBadSignature = errors.New("webhook signature does not match")

// Verify checks a delivery as a receiver should: header is its SignatureHeader, body the
// raw body as received, and the timestamp must be within tolerance of now (a replayed
// old delivery is refused). Any v1 signature may match (a header may carry several).
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("malformed %s header %q", SignatureHeader, header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook timestamp %s is %v away from now (tolerance %v)", time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrBadSignature
}
