package main

import (
	"bytes"
	"strings"
	"testing"
)

// --driver openstack checks its settings before serving, and its errors and log never
// show the service user's password, which comes from the environment.
func TestServeDriverSettings(t *testing.T) {
	const secret = "s3cret-driver-pass"
	t.Setenv("CLIMATE_KEYSTONE_PASSWORD", secret)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--driver", "vmware"}, `--driver "vmware": want standalone or openstack`},
		{[]string{"--driver", "openstack"}, "--driver openstack needs --keystone-url"},
		{[]string{"--driver", "openstack", "--keystone-url", "http://127.0.0.1:1/v3"}, "needs Climate's service user"},
		{[]string{"--driver", "openstack", "--keystone-url", "http://127.0.0.1:1/v3", "--keystone-username", "climate",
			"--keystone-project", "service", "--openstack-attempts", "0"}, "want at least 1 attempt"},
		{[]string{"--nova-notifications", "amqp://guest:" + secret + "@127.0.0.1:5672/"}, "--nova-notifications needs --driver openstack"},
		{[]string{"--driver", "openstack", "--keystone-url", "http://127.0.0.1:1/v3", "--keystone-username", "climate",
			"--keystone-project", "service", "--nova-notifications", "amqp://guest:" + secret + "@127.0.0.1:99999/"}, "--nova-notifications: amqp: the URL"},
		{[]string{"--driver", "openstack", "--keystone-url", "http://127.0.0.1:1/v3", "--keystone-username", "climate",
			"--keystone-project", "service", "--nova-notifications", "rabbit://guest:" + secret + "@h1:5672,guest:" + secret + "@h2:5672/"}, "--nova-notifications: amqp: one broker only"},
		// Nothing answers there: the error says so after --keystone-startup-wait.
		{[]string{"--driver", "openstack", "--keystone-url", "http://127.0.0.1:1/v3", "--keystone-username", "climate",
			"--keystone-project", "service", "--keystone-startup-wait", "0s"}, "--driver openstack: authenticating with Keystone at http://127.0.0.1:1/v3"},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		cmd := newRootCmd()
		cmd.SetArgs(append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
			continue
		}
		if strings.Contains(err.Error()+out.String(), secret) {
			t.Errorf("%v: the password shows: %v\n%s", tc.args, err, out.String())
		}
	}
}
