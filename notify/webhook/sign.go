package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
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

	// The Standard Webhooks headers (standardwebhooks.com), for receivers that verify
	// with its libraries: the delivery id, the Unix time, and "v1,BASE64" where BASE64 is
	// HMAC-SHA256 over "ID.TIME.BODY" keyed with the secret's base64 part.
	StandardIDHeader        = "webhook-id"
	StandardTimestampHeader = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
)

// PingEvent is the type of the test delivery sent when a webhook is created.
const PingEvent = "webhook.ping"

// NewSecret returns a new signing secret: 32 random bytes in base64 behind "whsec_", the
// Standard Webhooks form (the prefix also tells what it is when it turns up somewhere).
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// StandardSignature returns the StandardSignatureHeader value for delivery id of body at
// t. The key is the secret's base64 part, decoded, as Standard Webhooks libraries take
// it; a secret a client chose that is not of that form is used as it is.
func StandardSignature(secret, id string, t time.Time, body []byte) string {
	key := []byte(secret)
	if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(b64); err == nil && len(k) > 0 {
			key = k
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(t.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
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
