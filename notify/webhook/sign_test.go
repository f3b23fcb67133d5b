package webhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"climate/notify/webhook"
)

func TestSignVerify(t *testing.T) {
	at := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"event_type":"lease.create"}`)
	h := webhook.Sign("whsec_s3cret", at, body)
	if !strings.HasPrefix(h, "t=1893492000,v1=") || len(h) != len("t=1893492000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := webhook.Verify("whsec_s3cret", h, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("a good delivery: %v", err)
	}
	// Another signature beside the right one (a receiver may get several during rotation).
	if err := webhook.Verify("whsec_s3cret", "v1=00,"+h, body, at, time.Minute); err != nil {
		t.Errorf("with an extra v1: %v", err)
	}
	for name, c := range map[string]struct {
		secret, header string
		body           []byte
		now            time.Time
	}{
		"other secret":    {"whsec_other", h, body, at},
		"changed body":    {"whsec_s3cret", h, []byte(`{"event_type":"lease.delete"}`), at},
		"replayed later":  {"whsec_s3cret", h, body, at.Add(6 * time.Minute)},
		"from the future": {"whsec_s3cret", h, body, at.Add(-6 * time.Minute)},
		"changed time":    {"whsec_s3cret", strings.Replace(h, "t=1893492000", "t=1893492001", 1), body, at},
		"no signature":    {"whsec_s3cret", "t=1893492000", body, at},
		"empty":           {"whsec_s3cret", "", body, at},
	} {
		if err := webhook.Verify(c.secret, c.header, c.body, c.now, 5*time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		} else if (name == "other secret" || name == "changed body" || name == "changed time") && !errors.Is(err, webhook.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	if a, b := webhook.NewSecret(), webhook.NewSecret(); a == b || !strings.HasPrefix(a, "whsec_") || len(a) != 6+44 {
		t.Errorf("secrets %q, %q", a, b)
	}
}

// The Standard Webhooks signature, checked against the specification's own example.
func TestStandardSignature(t *testing.T) {
	got := webhook.StandardSignature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("StandardSignature = %q, want %q", got, want)
	}
	// A client's own secret that is not whsec_BASE64 keys the HMAC as it is.
	if a, b := webhook.StandardSignature("my-own-secret-123", "id", time.Unix(1, 0), nil), webhook.StandardSignature("my-own-secret-124", "id", time.Unix(1, 0), nil); a == b || !strings.HasPrefix(a, "v1,") {
		t.Errorf("own secrets: %q, %q", a, b)
	}
}
