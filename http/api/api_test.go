package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestHostJSONIsFlatAndOrdered(t *testing.T) {
	updated := "2030-01-02 03:04:05"
	h := Host{ID: "7", HypervisorHostname: "n7", VCPUs: 8, Reservable: true, CreatedAt: "2030-01-01 00:00:00",
		UpdatedAt: &updated, Extra: map[string]string{"rack": "r1", "gpu": "true"}}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"7","hypervisor_hostname":"n7","service_name":"","vcpus":8,"memory_mb":0,"local_gb":0,"cpu_info":"","hypervisor_type":"","hypervisor_version":0,"availability_zone":"","trust_id":"","reservable":true,"status":null,"created_at":"2030-01-01 00:00:00","updated_at":"2030-01-02 03:04:05","gpu":"true","rack":"r1"}`
	if string(b) != want {
		t.Fatalf("Marshal:\n got %s\nwant %s", b, want)
	}
	var back Host
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, h) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, h)
	}
	// Extra values the server wrote as numbers or booleans come back as their text.
	if err := json.Unmarshal([]byte(`{"id":"1","cores":64,"gpu":true,"updated_at":null}`), &back); err != nil || back.Extra["cores"] != "64" || back.Extra["gpu"] != "true" || back.UpdatedAt != nil {
		t.Fatalf("numbers and booleans: %v %+v", err, back)
	}
	if err := json.Unmarshal([]byte(`{"vcpus":"many"}`), &back); err == nil {
		t.Fatal("a string vcpus was accepted")
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90m": 90 * time.Minute, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour, " 4h ": 4 * time.Hour, "1h30m": 90 * time.Minute} {
		if got, ok := ParseDuration(in); !ok || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "0h", "-1h", "d", "1x", "1d-2d", "two hours"} {
		if got, ok := ParseDuration(bad); ok {
			t.Errorf("ParseDuration(%q) = %v, accepted", bad, got)
		}
	}
}
