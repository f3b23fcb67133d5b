package main

import (
	"strings"
	"testing"
)

// climate keystone register against the real Keystone: the first run creates the service,
// its three endpoints, the service user (with the password from the environment) and its
// roles; the second finds them all; the new user then authenticates.
func TestKeystoneRegister(t *testing.T) {
	k := needKeystone(t)
	for name, v := range map[string]string{"OS_AUTH_URL": k.url, "OS_USERNAME": "admin", "OS_PASSWORD": "adminpass",
		"OS_PROJECT_NAME": "admin", "OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default",
		"CLIMATE_KEYSTONE_PASSWORD": "registered-pass"} {
		t.Setenv(name, v)
	}
	args := []string{"keystone", "register", "--url", "http://127.0.0.1:1/v1", "--service-name", "climate-register-test",
		"--service-user", "climate-register-test", "--service-project", "register-test"}
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	for _, want := range []string{"created  service climate-register-test (type reservation", "created  public endpoint http://127.0.0.1:1/v1 in RegionOne",
		"created  internal endpoint", "created  admin endpoint", "created  project register-test", "created  user climate-register-test",
		"role service of climate-register-test on project register-test", "role admin of climate-register-test"} {
		if !strings.Contains(out, want) {
			t.Errorf("first run lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, args...)
	if err != nil || strings.Contains(out, "created") || strings.Count(out, "exists ") < 8 {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if tok := k.token(t, "climate-register-test", "registered-pass", "register-test"); tok == "" {
		t.Fatal("the registered service user cannot authenticate")
	}
	t.Setenv("OS_PASSWORD", "wrong")
	if out, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "authenticating the administrator") {
		t.Fatalf("wrong admin password: %v\n%s", err, out)
	}
	t.Setenv("OS_AUTH_URL", "")
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "OS_AUTH_URL is not set") {
		t.Fatalf("no openrc: %v", err)
	}
}
