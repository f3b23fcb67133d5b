package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"climate"
	"climate/notify/webhook"
)

// noDNS is a resolver whose every lookup fails at once (no DNS server is reachable here).
var noDNS = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no DNS here")
}}

func TestGuardAddresses(t *testing.T) {
	strict, open := webhook.Guard{}, webhook.Guard{AllowPrivate: true}
	for _, c := range []struct {
		addr         string
		strict, open bool // allowed
	}{
		{"93.184.215.14", true, true},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", true, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true}, // IPv4-mapped
		{"10.1.2.3", false, true},
		{"172.16.0.1", false, true},
		{"192.168.1.1", false, true},
		{"169.254.169.254", false, true}, // cloud metadata
		{"fe80::1", false, true},
		{"fd00::1", false, true},
		{"100.64.0.1", false, true},       // shared address space (carrier NAT)
		{"0.1.2.3", false, true},          // "this network"
		{"64:ff9b::a01:203", false, true}, // NAT64 of 10.1.2.3
		{"2002:a01:203::1", false, true},  // 6to4 of 10.1.2.3
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
	} {
		a := netip.MustParseAddr(c.addr)
		if err := strict.CheckAddr(a); (err == nil) != c.strict {
			t.Errorf("strict guard, %s: %v", c.addr, err)
		}
		if err := open.CheckAddr(a); (err == nil) != c.open {
			t.Errorf("AllowPrivate guard, %s: %v", c.addr, err)
		}
	}
	if err := strict.Control("tcp4", "10.0.0.1:443", nil); err == nil || !strings.Contains(err.Error(), "private address") {
		t.Errorf("Control(10.0.0.1:443) = %v", err)
	}
	if err := strict.Control("tcp4", "93.184.215.14:443", nil); err != nil {
		t.Errorf("Control(public) = %v", err)
	}
}

func TestGuardURLs(t *testing.T) {
	ctx := context.Background()
	strict := webhook.Guard{Resolver: noDNS}
	for raw, want := range map[string]string{
		"":                              "scheme must be http or https",
		"ftp://93.184.215.14/x":         "scheme must be http or https",
		"/relative":                     "scheme must be http or https",
		"http://":                       "no host",
		"http://user:pw@93.184.215.14/": "credentials in the URL",
		"http://93.184.215.14/#frag":    "fragment",
		"http://93.184.215.14:99999/":   "bad port",
		"http://127.0.0.1:8080/hook":    "loopback address",
		"http://[::1]/":                 "loopback address",
		"http://10.1.2.3/":              "private address",
		"http://169.254.169.254/latest/meta-data":                                  "link-local address",
		"http://receiver.example/":                                                 "does not resolve",
		"http://93.184.215.14/\x00":                                                "NUL",
		"http://93.184.215.14/" + strings.Repeat("a", climate.MaxWebhookURLLength): "too long",
	} {
		_, err := strict.CheckURL(ctx, raw)
		if err == nil || climate.ErrorCode(err) != climate.CodeInvalid || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%.60q) = %v, want a CodeInvalid error saying %q", raw, err, want)
		}
		if strings.Contains(raw, "pw@") && strings.Contains(err.Error(), "pw") {
			t.Errorf("the refusal shows the password: %v", err)
		}
	}
	for _, raw := range []string{"http://93.184.215.14/hook?token=abc", "https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8443/"} {
		if _, err := strict.CheckURL(ctx, raw); err != nil {
			t.Errorf("CheckURL(%q) = %v", raw, err)
		}
	}
	if _, err := (webhook.Guard{AllowPrivate: true}).CheckURL(ctx, "http://127.0.0.1:8080/hook"); err != nil {
		t.Errorf("AllowPrivate, loopback: %v", err)
	}
}
