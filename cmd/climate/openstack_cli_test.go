package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The real `openstack reservation` commands (python3-openstackclient with Blazar's
// plugin, from Debian) against climate serve without authentication (keystoneauth's
// "none" plugin and an endpoint: every caller is an admin): floating IPs created,
// listed, shown and deleted, and leases of instance slots and floating IPs created,
// shown and deleted, each as the CLI parses and sends them.
func TestOpenStackCLI(t *testing.T) {
	const openstack = "/usr/bin/openstack"
	if _, err := os.Stat(openstack); err != nil {
		if os.Getenv("CLIMATE_TEST_OPENSTACK") == "required" {
			t.Fatalf("the openstack CLI is required here but missing: %v", err)
		}
		t.Skip("python3-openstackclient is not installed (apt-get install python3-openstackclient); CI installs it")
	}
	// The reservation commands are Blazar's plugin, in python3-blazarclient, which the
	// openstack CLI alone (installed for Nova, say) does not bring.
	if err := exec.Command("/usr/bin/python3", "-c", "import blazarclient").Run(); err != nil {
		if os.Getenv("CLIMATE_TEST_OPENSTACK") == "required" {
			t.Fatalf("python3-blazarclient is required here but missing: %v", err)
		}
		t.Skip("python3-blazarclient is not installed (apt-get install python3-blazarclient); CI installs it")
	}
	s := startServer(t, serveOptions{})
	post(t, s.url+"/v1/os-hosts", `{"name": "c1", "vcpus": 8, "memory_mb": 16384}`, 201)
	post(t, s.url+"/v1/os-hosts", `{"name": "c2", "vcpus": 8, "memory_mb": 16384}`, 201)
	home := t.TempDir()
	// try returns what the command printed: its output, or on failure its error text.
	try := func(args ...string) (string, error) {
		cmd := exec.Command(openstack, append([]string{"--os-auth-type", "none", "--os-endpoint", s.url + "/v1", "reservation"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stderr.String() + stdout.String(), err
		}
		return stdout.String(), nil
	}
	run := func(v any, args ...string) {
		t.Helper()
		out, err := try(append(args, "-f", "json")...)
		if err != nil {
			t.Fatalf("openstack reservation %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if v != nil {
			// Creations print "Created a new …:" before the object.
			if i := strings.IndexAny(out, "{["); i > 0 {
				out = out[i:]
			}
			if err := json.Unmarshal([]byte(out), v); err != nil {
				t.Fatalf("openstack reservation %s: not JSON (%v): %s", strings.Join(args, " "), err, out)
			}
		}
	}

	var fip map[string]any
	run(&fip, "floatingip", "create", "ext-net", "172.24.4.10")
	if fip["floating_ip_address"] != "172.24.4.10" || fip["floating_network_id"] != "ext-net" {
		t.Fatalf("floatingip create: %v", fip)
	}
	id := fip["id"].(string)
	var shown map[string]any
	if run(&shown, "floatingip", "show", id); shown["id"] != id {
		t.Fatalf("floatingip show: %v", shown)
	}
	var list []map[string]any
	if run(&list, "floatingip", "list"); len(list) != 1 || list[0]["floating_ip_address"] != "172.24.4.10" {
		t.Fatalf("floatingip list: %v", list)
	}

	lease := func(name, affinity string) []string {
		return []string{"lease", "create", "--start-date", "2030-01-01 10:00", "--end-date", "2030-01-01 12:00",
			"--reservation", "resource_type=virtual:instance,amount=3,vcpus=2,memory_mb=2048,disk_gb=0,affinity=" + affinity,
			"--reservation", "resource_type=virtual:floatingip,network_id=ext-net,amount=1", name}
	}
	// affinity=False wants 3 distinct hosts and there are 2: the CLI shows the 409.
	if out, err := try(lease("spread", "False")...); err == nil || !strings.Contains(out, "on distinct hosts (anti-affinity)") {
		t.Fatalf("3 anti-affine slots on 2 hosts: %v\n%s", err, out)
	}
	// The CLI shows reservations as one text of JSON objects, one after another.
	var l struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		Reservations string `json:"reservations"`
	}
	run(&l, lease("web", "None")...)
	var reservations []map[string]any
	for d := json.NewDecoder(strings.NewReader(l.Reservations)); d.More(); {
		var r map[string]any
		if err := d.Decode(&r); err != nil {
			t.Fatalf("reservations %q: %v", l.Reservations, err)
		}
		reservations = append(reservations, r)
	}
	if l.Status != "PENDING" || len(reservations) != 2 {
		t.Fatalf("lease create: %+v", l)
	}
	for _, r := range reservations {
		switch r["resource_type"] {
		case "virtual:instance":
			if r["amount"] != 3.0 || r["vcpus"] != 2.0 || r["affinity"] != nil || r["flavor_id"] != r["id"] {
				t.Errorf("instance reservation: %v", r)
			}
		case "virtual:floatingip":
			if r["network_id"] != "ext-net" || r["amount"] != 1.0 {
				t.Errorf("floating IP reservation: %v", r)
			}
		default:
			t.Errorf("reservation %v", r)
		}
	}
	// The address is held: a second lease in the window is refused, and it cannot be deleted.
	if out, err := try(lease("again", "None")...); err == nil || !strings.Contains(out, "Not enough floating IPs available") {
		t.Fatalf("a held address leased again: %v\n%s", err, out)
	}
	if out, err := try("floatingip", "delete", id); err == nil || !strings.Contains(out, "cannot be deleted") {
		t.Fatalf("a held address deleted: %v\n%s", err, out)
	}
	var again map[string]any
	if run(&again, "lease", "show", l.ID); again["id"] != l.ID {
		t.Fatalf("lease show: %v", again)
	}
	if out, err := try("lease", "delete", l.ID); err != nil {
		t.Fatalf("lease delete: %v\n%s", err, out)
	}
	if out, err := try("floatingip", "delete", id); err != nil {
		t.Fatalf("floatingip delete: %v\n%s", err, out)
	}
	if run(&list, "floatingip", "list"); len(list) != 0 {
		t.Fatalf("after delete: %v", list)
	}

	// An endpoint given without /v1 gets a hint at it (issue 18, item 18).
	cmd := exec.Command(openstack, "--os-auth-type", "none", "--os-endpoint", s.url, "reservation", "lease", "list")
	cmd.Env = append(os.Environ(), "HOME="+home)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "The API is under /v1: did you mean /v1/leases?") {
		t.Errorf("openstack --os-endpoint without /v1: %v\n%s", err, out)
	}
}
