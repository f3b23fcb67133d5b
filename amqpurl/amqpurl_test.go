package amqpurl

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	addr, password, err := Check("amqp://climate:s3cret@rabbit.example:5673/nova")
	if err != nil || addr != "amqp://climate@rabbit.example:5673/nova" || password != "s3cret" {
		t.Errorf("Check = %q, %q, %v; want the URL without its password, and the password", addr, password, err)
	}
	if addr, _, err := Check("amqp://guest:guest@127.0.0.1/"); err != nil || addr != "amqp://guest@127.0.0.1:5672/" {
		t.Errorf("default port and vhost: %q, %v", addr, err)
	}
	for raw, want := range map[string]string{
		"":                               "no URL",
		"http://u:s3cret@h:5672/":        "scheme",
		"amqp://u:s3cret@:5672/":         "no host",
		"amqp://u:s3cret@h:99999/":       "out of range",
		"amqp://u:s3cret@h:5672/ x":      "white space",
		"amqp://u:s3c%zzret@h:5672/":     "does not parse",
		"amqp://u:s3cret@h:5672/a/b?x=1": "",
	} {
		_, _, err := Check(raw)
		switch {
		case want == "" && err != nil:
			t.Errorf("Check(%q): %v", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("Check(%q) = %v, want an error saying %q", raw, err, want)
		case err != nil && strings.Contains(err.Error(), "s3c"):
			t.Errorf("Check(%q) repeats the password: %v", raw, err)
		}
	}
}
