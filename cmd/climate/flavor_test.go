package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// flavorJSON runs a command printing one flavor with -o json and decodes it.
func (c *cli) flavorJSON(args ...string) flavorView {
	c.t.Helper()
	out := c.ok(append(args, "-o", "json")...)
	var f flavorView
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		c.t.Fatalf("climate %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return f
}

func TestCLIFlavors(t *testing.T) {
	c := newCLI(t, serveOptions{})

	// create: a FIELD/VALUE table; -o json the flavor with the plain ephemeral key.
	out := c.ok("flavor", "create", "m1.small", "--vcpus", "1", "--ram", "2048", "--disk", "20")
	rows := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]] = strings.Join(f[1:], " ")
	}
	if rows["name"] != "m1.small" || rows["vcpus"] != "1" || rows["ram"] != "2048" || rows["disk"] != "20" ||
		rows["ephemeral"] != "0" || len(rows["id"]) != 36 {
		t.Fatalf("flavor create table:\n%s", out)
	}
	small := rows["id"]
	gpu := c.flavorJSON("flavor", "create", "gpu.a100", "--id", "gpu-1", "--vcpus", "16", "--ram", "131072", "--disk", "200",
		"--ephemeral", "50", "--extra-spec", "trait:CUSTOM_GPU_A100=required", "--extra-spec", "resources:VGPU=1",
		"--extra-spec", "note=a=b, c")
	specs := map[string]string{"trait:CUSTOM_GPU_A100": "required", "resources:VGPU": "1", "note": "a=b, c"}
	want := flavorView{ID: "gpu-1", Name: "gpu.a100", VCPUs: 16, RAM: 131072, Disk: 200, Ephemeral: 50, ExtraSpecs: specs,
		CreatedAt: gpu.CreatedAt}
	if !reflect.DeepEqual(gpu, want) || gpu.CreatedAt == "" {
		t.Fatalf("flavor create --extra-spec -o json:\n%+v\nwant\n%+v", gpu, want)
	}
	tiny := strings.TrimSpace(c.ok("flavor", "create", "m1.tiny", "--vcpus", "1", "--ram", "512", "--disk", "0", "-o", "value", "-c", "id"))

	// list: the default columns, in registration order; -o value, --sort-by and -c.
	out = c.ok("flavor", "list")
	got := lines(out)
	if len(got) != 4 || strings.Join(got[0], " ") != "ID NAME VCPUS RAM DISK EPHEMERAL" {
		t.Fatalf("flavor list:\n%s", out)
	}
	if got[1][0] != small || got[2][0] != "gpu-1" || got[3][0] != tiny || strings.Join(got[2], " ") != "gpu-1 gpu.a100 16 131072 200 50" {
		t.Errorf("flavor list is not in registration order:\n%s", out)
	}
	if out := c.ok("flavor", "list", "-o", "value", "-c", "name", "--sort-by", "ram"); out != "m1.tiny\nm1.small\ngpu.a100\n" {
		t.Errorf("flavor list -o value --sort-by ram:\n%s", out)
	}
	if out := c.ok("flavor", "list", "-c", "name,extra_specs", "--no-headers"); !strings.Contains(out, "gpu.a100  note=a=b, c resources:VGPU=1 trait:CUSTOM_GPU_A100=required") {
		t.Errorf("flavor list -c name,extra_specs:\n%s", out)
	}
	var all []flavorView
	if err := json.Unmarshal([]byte(c.ok("flavors", "list", "-o", "json")), &all); err != nil || len(all) != 3 {
		t.Fatalf("flavor list -o json: %v %+v", err, all)
	}
	if all[0].ExtraSpecs == nil || len(all[0].ExtraSpecs) != 0 {
		t.Errorf("a flavor without extra specs: %+v, want extra_specs {}", all[0])
	}

	// show, by id or by name.
	if f := c.flavorJSON("flavor", "show", "gpu-1"); !reflect.DeepEqual(f, gpu) || !reflect.DeepEqual(f, all[1]) {
		t.Errorf("flavor show gpu-1: %+v, want %+v", f, gpu)
	}
	if f := c.flavorJSON("flavor", "show", "gpu.a100"); !reflect.DeepEqual(f, gpu) {
		t.Errorf("flavor show by name: %+v, want %+v", f, gpu)
	}
	if out := c.ok("flavor", "show", "m1.small", "-o", "value", "-c", "ram"); out != "2048\n" {
		t.Errorf("flavor show -o value: %q", out)
	}

	// Errors: the server's message, one line; missing flags named by the CLI.
	c.fails("Flavor with name m1.small already exists", "flavor", "create", "m1.small", "--vcpus", "1", "--ram", "1", "--disk", "1")
	c.fails("Flavor with ID gpu-1 already exists", "flavor", "create", "other", "--id", "gpu-1", "--vcpus", "1", "--ram", "1", "--disk", "1")
	c.fails(`Invalid trait value "yes" for trait:X`, "flavor", "create", "bad", "--vcpus", "1", "--ram", "1", "--disk", "1", "--extra-spec", "trait:X=yes")
	c.fails("Malformed parameter vcpus (must be an integer from 1", "flavor", "create", "bad", "--vcpus", "0", "--ram", "1", "--disk", "1")
	c.fails(`"disk" not set`, "flavor", "create", "bad", "--vcpus", "1", "--ram", "1")
	c.fails(`--extra-spec "trait:X": want KEY=VALUE`, "flavor", "create", "bad", "--vcpus", "1", "--ram", "1", "--disk", "1", "--extra-spec", "trait:X")
	c.fails("--extra-spec k is given twice", "flavor", "create", "bad", "--vcpus", "1", "--ram", "1", "--disk", "1", "--extra-spec", "k=1", "--extra-spec", "k=2")
	c.fails(`No flavor with id or name "nope"`, "flavor", "show", "nope")
	c.fails("NAME", "flavor", "create", "--vcpus", "1", "--ram", "1", "--disk", "1")

	// delete several, by id and name; an unknown one stops with its name.
	if out := c.ok("flavor", "delete", "gpu.a100", tiny); out != "Deleted flavor gpu-1\nDeleted flavor "+tiny+"\n" {
		t.Errorf("flavor delete: %q", out)
	}
	c.fails(`deleting flavor gpu-1: No flavor with id or name "gpu-1"`, "flavor", "delete", "gpu-1")
	if got := lines(c.ok("flavor", "list", "--no-headers")); len(got) != 1 || got[0][0] != small {
		t.Errorf("after delete: %v, want only %s", got, small)
	}
}
