package flavor

import (
	"testing"

	"climate"
)

// A flavor's slot: its sizes, replaced by unnumbered resources: specs, plus Nova's
// request groups; other resource classes are refused in standalone mode; traits in any
// group filter hosts.
func TestSizeAndTraits(t *testing.T) {
	f := source{ID: "f", VCPUs: 8, RAM: 4096, Disk: 10, Ephemeral: 5, ExtraSpecs: map[string]string{
		"resources:VCPU": "2", "resources1:MEMORY_MB": "1024", "resources_gpu:DISK_GB": "1",
		"trait:CUSTOM_A": "required", "trait1:CUSTOM_B": "forbidden", "hw:cpu_policy": "dedicated",
	}}
	size, err := sizeOf(f)
	if err != nil || size != (climate.Size{VCPUs: 2, MemoryMB: 5120, DiskGB: 16}) {
		t.Fatalf("size %+v, %v", size, err)
	}
	traits, err := traitsOf(f)
	if err != nil || len(traits) != 2 || !traits["CUSTOM_A"] || traits["CUSTOM_B"] {
		t.Fatalf("traits %v, %v", traits, err)
	}
	for _, specs := range []map[string]string{
		{"resources:VGPU": "1"}, {"resources2:CUSTOM_FPGA": "1"}, {"resources:VCPU": "x"}, {"trait:X": "preferred"},
	} {
		f := source{ID: "bad", VCPUs: 1, RAM: 1, ExtraSpecs: specs}
		_, err1 := sizeOf(f)
		_, err2 := traitsOf(f)
		if err1 == nil && err2 == nil {
			t.Errorf("extra specs %v accepted", specs)
		}
	}
	if _, err := sizeOf(source{ID: "zero", VCPUs: 1, RAM: 1, ExtraSpecs: map[string]string{"resources:CUSTOM_X": "0", "resourcesx": "1"}}); err != nil {
		t.Errorf("a zero custom class or a key that is not a spec: %v", err)
	}
}
