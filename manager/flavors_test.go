package manager_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"climate"
	"climate/manager"
)

func flavorReq(name string) climate.FlavorRequest {
	return climate.FlavorRequest{Name: name, VCPUs: 2, RAM: 4096, Disk: 40}
}

// TestFlavorValidation: every bad request is a 400 naming what is wrong, and nothing is
// registered.
func TestFlavorValidation(t *testing.T) {
	m, _, _ := setup(t)
	ctx := context.Background()
	with := func(patch func(*climate.FlavorRequest)) climate.FlavorRequest {
		r := flavorReq("m1.medium")
		patch(&r)
		return r
	}
	specs := func(kv ...string) func(*climate.FlavorRequest) {
		return func(r *climate.FlavorRequest) {
			r.ExtraSpecs = map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				r.ExtraSpecs[kv[i]] = kv[i+1]
			}
		}
	}
	many := map[string]string{}
	for i := range manager.MaxExtraSpecs + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, tc := range []struct {
		name string
		req  climate.FlavorRequest
		text string
	}{
		{"no name", with(func(r *climate.FlavorRequest) { r.Name = "" }), "Missing parameter name"},
		{"long name", with(func(r *climate.FlavorRequest) { r.Name = strings.Repeat("n", 256) }), "name is too long"},
		{"NUL name", with(func(r *climate.FlavorRequest) { r.Name = "a\x00" }), "name must not contain NUL"},
		{"spaced name", with(func(r *climate.FlavorRequest) { r.Name = " m1" }), "Malformed parameter name (must not begin or end with whitespace)"},
		{"long id", with(func(r *climate.FlavorRequest) { r.ID = strings.Repeat("i", 256) }), "id is too long"},
		{"slash id", with(func(r *climate.FlavorRequest) { r.ID = "a/b" }), "Malformed parameter id (must not contain '/')"},
		{"dot id", with(func(r *climate.FlavorRequest) { r.ID = ".." }), "Malformed parameter id"},
		{".json id", with(func(r *climate.FlavorRequest) { r.ID = "x.json" }), `must not end with ".json"`},
		{"control id", with(func(r *climate.FlavorRequest) { r.ID = "a\tb" }), "control characters"},
		{"zero vcpus", with(func(r *climate.FlavorRequest) { r.VCPUs = 0 }), "Malformed parameter vcpus (must be an integer from 1 to 2147483647): 0"},
		{"huge vcpus", with(func(r *climate.FlavorRequest) { r.VCPUs = 1 << 31 }), "Malformed parameter vcpus"},
		{"zero ram", with(func(r *climate.FlavorRequest) { r.RAM = 0 }), "Malformed parameter ram (must be an integer from 1"},
		{"negative disk", with(func(r *climate.FlavorRequest) { r.Disk = -1 }), "Malformed parameter disk (must be an integer from 0"},
		{"negative ephemeral", with(func(r *climate.FlavorRequest) { r.Ephemeral = -5 }), "Malformed parameter ephemeral (must be an integer from 0"},
		{"too many specs", with(func(r *climate.FlavorRequest) { r.ExtraSpecs = many }), "at most 64 entries"},
		{"empty key", with(specs("", "x")), "keys must not be empty"},
		{"long key", with(specs(strings.Repeat("k", 256), "x")), "extra_specs key is too long"},
		{"long value", with(specs("hw:x", strings.Repeat("v", 256))), "extra_specs value of hw:x is too long"},
		{"trait value", with(specs("trait:HW_CPU_X86_AVX2", "yes")), `Invalid trait value "yes" for trait:HW_CPU_X86_AVX2: expected "required" or "forbidden"`},
		{"trait case", with(specs("trait:X", "Required")), `Invalid trait value "Required"`},
		{"group trait", with(specs("trait1:X", "")), `Invalid trait value "" for trait1:X`},
		{"named group trait", with(specs("trait_gpu:X", "maybe")), "for trait_gpu:X"},
		{"trait without name", with(specs("trait:", "required")), `"trait:" names no trait`},
		{"resources word", with(specs("resources:VGPU", "one")), `Invalid resources value "one" for resources:VGPU: expected a non-negative integer`},
		{"resources negative", with(specs("resources:VCPU", "-1")), `Invalid resources value "-1"`},
		{"resources signed", with(specs("resources:VCPU", "+1")), `Invalid resources value "+1"`},
		{"resources fraction", with(specs("resources2:VCPU", "1.5")), `Invalid resources value "1.5" for resources2:VCPU`},
		{"resources huge", with(specs("resources:VCPU", "2147483648")), `Invalid resources value "2147483648"`},
		{"resources without class", with(specs("resources:", "1")), `"resources:" names no resource class`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.CreateFlavor(ctx, admin, tc.req)
			if climate.ErrorCode(err) != climate.CodeInvalid || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v (code %s), want invalid containing %q", err, climate.ErrorCode(err), tc.text)
			}
		})
	}
	if fs, err := m.ListFlavors(ctx, admin); err != nil || len(fs) != 0 {
		t.Errorf("after refused creates: %v %v, want no flavor", fs, err)
	}
}

// TestFlavors: what placement reads is accepted (group suffixes, zero amounts, keys it
// does not read are free), the id is the admin's or generated, a taken id or name is a
// conflict naming it, readers read, only admins write.
func TestFlavors(t *testing.T) {
	m, st, clk := setup(t)
	ctx := context.Background()

	req := flavorReq("m1.gpu")
	req.ID, req.Ephemeral = "gpu-1", 10
	req.ExtraSpecs = map[string]string{"trait:HW_GPU_API_VULKAN": "required", "trait1:CUSTOM_X": "forbidden", "resources:VGPU": "1",
		"resources_gpu:VCPU": "0", "resources10:CUSTOM_FPGA": "007", "hw:cpu_policy": "dedicated", "traits:x": "anything", "resourcesx": "y"}
	gpu, err := m.CreateFlavor(ctx, admin, req)
	if err != nil {
		t.Fatal(err)
	}
	want := &climate.Flavor{ID: "gpu-1", Name: "m1.gpu", VCPUs: 2, RAM: 4096, Disk: 40, Ephemeral: 10, ExtraSpecs: req.ExtraSpecs, CreatedAt: t0}
	if !reflect.DeepEqual(gpu, want) {
		t.Errorf("CreateFlavor = %+v, want %+v", gpu, want)
	}
	req.ExtraSpecs["hw:cpu_policy"] = "shared" // the flavor kept its own copy
	if got, err := m.GetFlavor(ctx, reader, "gpu-1"); err != nil || !reflect.DeepEqual(got, gpu) || got.ExtraSpecs["hw:cpu_policy"] != "dedicated" {
		t.Errorf("GetFlavor = %+v, %v; want %+v", got, err, gpu)
	}

	// A generated id; no extra specs is nil, as the store gives it back. Created later,
	// so listed after gpu-1.
	clk.Advance(time.Minute)
	small, err := m.CreateFlavor(ctx, admin, climate.FlavorRequest{Name: "m1.small", VCPUs: 1, RAM: 2048, ExtraSpecs: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(small.ID) != 36 || small.ExtraSpecs != nil || small.Disk != 0 {
		t.Errorf("generated flavor: %+v", small)
	}
	if got, _ := m.GetFlavor(ctx, admin, small.ID); !reflect.DeepEqual(got, small) {
		t.Errorf("GetFlavor = %+v, want %+v", got, small)
	}

	// Conflicts name what is taken.
	_, err = m.CreateFlavor(ctx, admin, climate.FlavorRequest{ID: "gpu-1", Name: "other", VCPUs: 1, RAM: 1})
	wantCode(t, err, climate.CodeConflict, "Flavor with ID gpu-1 already exists")
	_, err = m.CreateFlavor(ctx, admin, climate.FlavorRequest{Name: "m1.small", VCPUs: 1, RAM: 1})
	wantCode(t, err, climate.CodeConflict, "Flavor with name m1.small already exists")

	// Policies: readers and members read, only admins write; guests see nothing.
	guest := climate.Identity{UserID: "gus", ProjectID: "physics", Roles: []string{"guest"}}
	for _, who := range []climate.Identity{reader, alice, bob} {
		fs, err := m.ListFlavors(ctx, who)
		if err != nil || len(fs) != 2 || fs[0].ID != "gpu-1" || fs[1].ID != small.ID {
			t.Errorf("ListFlavors as %s: %v %v", who.UserID, fs, err)
		}
		_, err = m.CreateFlavor(ctx, who, flavorReq("m1.mine"))
		wantCode(t, err, climate.CodeForbidden, "blazar:flavors:post")
		wantCode(t, m.DeleteFlavor(ctx, who, "gpu-1"), climate.CodeForbidden, "blazar:flavors:delete")
	}
	_, err = m.ListFlavors(ctx, guest)
	wantCode(t, err, climate.CodeForbidden, "blazar:flavors:get")
	_, err = m.GetFlavor(ctx, guest, "gpu-1")
	wantCode(t, err, climate.CodeForbidden, "blazar:flavors:get")
	// Policy first: a guest learns nothing about ids.
	_, err = m.GetFlavor(ctx, guest, "nope")
	wantCode(t, err, climate.CodeForbidden, "blazar:flavors:get")

	// Unknown and oversized ids.
	_, err = m.GetFlavor(ctx, reader, "nope")
	wantCode(t, err, climate.CodeNotFound, "Object with {'flavor_id': 'nope'} not found")
	wantCode(t, m.DeleteFlavor(ctx, admin, "nope"), climate.CodeNotFound, "{'flavor_id': 'nope'}")
	_, err = m.GetFlavor(ctx, reader, strings.Repeat("x", 300))
	wantCode(t, err, climate.CodeInvalid, "too long")

	// Delete frees the id and name; the inventory revision never moved.
	var rev int64
	_ = st.View(ctx, func(tx climate.Tx) (err error) { rev, err = tx.InventoryRevision(ctx); return err })
	if err := m.DeleteFlavor(ctx, admin, "gpu-1"); err != nil {
		t.Fatal(err)
	}
	_, err = m.GetFlavor(ctx, admin, "gpu-1")
	wantCode(t, err, climate.CodeNotFound, "gpu-1")
	if _, err := m.CreateFlavor(ctx, admin, climate.FlavorRequest{ID: "gpu-1", Name: "m1.gpu", VCPUs: 1, RAM: 1}); err != nil {
		t.Errorf("re-register a deleted flavor: %v", err)
	}
	var after int64
	_ = st.View(ctx, func(tx climate.Tx) (err error) { after, err = tx.InventoryRevision(ctx); return err })
	if after != rev {
		t.Errorf("inventory revision moved from %d to %d with flavors", rev, after)
	}
}
