package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"climate/http/api"
)

// floatingIPJSON runs a command printing one floating IP with -o json and decodes it.
func (c *cli) floatingIPJSON(args ...string) api.FloatingIP {
	c.t.Helper()
	out := c.ok(append(args, "-o", "json")...)
	var f api.FloatingIP
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		c.t.Fatalf("climate %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return f
}

func TestCLIFloatingIPs(t *testing.T) {
	c := newCLI(t, serveOptions{})

	// create: a FIELD/VALUE table; -o json the API's object; the address canonical.
	out := c.ok("floatingip", "create", "ext-net", "172.24.4.101")
	rows := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]] = strings.Join(f[1:], " ")
	}
	if rows["floating_ip_address"] != "172.24.4.101" || rows["floating_network_id"] != "ext-net" || rows["reservable"] != "true" || rows["id"] == "" {
		t.Fatalf("floatingip create table:\n%s", out)
	}
	a := rows["id"]
	b := c.floatingIPJSON("floatingip", "create", "ext-net", "2001:DB8::10", "--subnet-id", "ext-v6")
	if b.Address != "2001:db8::10" || b.SubnetID == nil || *b.SubnetID != "ext-v6" || b.FloatingNetworkID != "ext-net" {
		t.Fatalf("floatingip create --subnet-id -o json: %+v", b)
	}
	id := strings.TrimSpace(c.ok("floatingip", "create", "other-net", "172.24.4.101", "-o", "value", "-c", "id"))

	// list: the default columns, in registration order; -o value and --sort-by.
	out = c.ok("floatingip", "list")
	got := lines(out)
	if len(got) != 4 || strings.Join(got[0], " ") != "ID FLOATING NETWORK ID FLOATING IP ADDRESS SUBNET ID RESERVABLE" {
		t.Fatalf("floatingip list:\n%s", out)
	}
	if got[1][0] != a || got[2][0] != b.ID || got[3][0] != id {
		t.Errorf("floatingip list is not in registration order:\n%s", out)
	}
	if out := c.ok("floatingip", "list", "-o", "value", "-c", "floating_ip_address", "--sort-by", "floating_ip_address"); out != "172.24.4.101\n172.24.4.101\n2001:db8::10\n" {
		t.Errorf("floatingip list -o value --sort-by:\n%s", out)
	}
	var all []api.FloatingIP
	if err := json.Unmarshal([]byte(c.ok("floatingips", "list", "-o", "json")), &all); err != nil || len(all) != 3 {
		t.Fatalf("floatingip list -o json: %v %+v", err, all)
	}

	// show.
	if f := c.floatingIPJSON("floatingip", "show", b.ID); !reflect.DeepEqual(f, b) || !reflect.DeepEqual(f, all[1]) {
		t.Errorf("floatingip show: %+v, want %+v", f, b)
	}
	if out := c.ok("floatingip", "show", a, "-o", "value", "-c", "floating_ip_address"); out != "172.24.4.101\n" {
		t.Errorf("floatingip show -o value: %q", out)
	}

	// Errors: the server's message, one line.
	c.fails("already registered on network ext-net", "floatingip", "create", "ext-net", "172.24.4.101")
	c.fails(`"300.1.1.1" is not an IPv4 or IPv6 address`, "floatingip", "create", "ext-net", "300.1.1.1")
	c.fails("Missing parameter floating_network_id", "floatingip", "create", "", "172.24.4.7")
	c.fails("Object with {'floatingip_id': 'nope'} not found", "floatingip", "show", "nope")
	c.fails("NETWORK_ID ADDRESS", "floatingip", "create", "ext-net")

	// delete several; an unknown one stops with its id named.
	if out := c.ok("floatingip", "delete", a, id); out != "Deleted floating IP "+a+"\nDeleted floating IP "+id+"\n" {
		t.Errorf("floatingip delete: %q", out)
	}
	c.fails("deleting floating IP "+a+": Object with {'floatingip_id': '"+a+"'} not found", "floatingip", "delete", a)
	if got := lines(c.ok("floatingip", "list", "--no-headers")); len(got) != 1 || got[0][0] != b.ID {
		t.Errorf("after delete: %v, want only %s", got, b.ID)
	}
}
