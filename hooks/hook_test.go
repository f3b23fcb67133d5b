package hooks

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "ipmitool -I lanplus -H bmc-1 chassis power on", want: []string{"ipmitool", "-I", "lanplus", "-H", "bmc-1", "chassis", "power", "on"}},
		{in: "  a\tb\n c  ", want: []string{"a", "b", "c"}},
		{in: `sh -c 'echo "$CLIMATE_HOST_NAME" >> /tmp/log'`, want: []string{"sh", "-c", `echo "$CLIMATE_HOST_NAME" >> /tmp/log`}},
		{in: `say "a b" c\ d "q\"x" "back\\slash" "keep\n"`, want: []string{"say", "a b", "c d", `q"x`, `back\slash`, `keep\n`}},
		{in: `x''y ""`, want: []string{"xy", ""}},
		{in: "$HOME *", want: []string{"$HOME", "*"}}, // no expansion
		{in: "", err: "empty command line"},
		{in: "   ", err: "empty command line"},
		{in: "a 'b", err: "unterminated single quote"},
		{in: `a "b`, err: "unterminated double quote"},
		{in: `a \`, err: "trailing backslash"},
	} {
		got, err := Split(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Split(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	h, err := Parse("https://user:pw@ops.example.org/climate/hook?token=s3cret")
	if err != nil || h.URL == "" || h.Argv != nil {
		t.Fatalf("Parse(URL) = %+v, %v; want a webhook", h, err)
	}
	if s := h.String(); s != "webhook https://ops.example.org/climate/hook" || strings.Contains(s, "s3cret") || strings.Contains(s, "pw") {
		t.Errorf("webhook String() = %q: want scheme, host and path only", s)
	}
	h, err = Parse("/usr/bin/ipmitool -H bmc -P s3cret chassis power on")
	if err != nil || h.URL != "" || len(h.Argv) != 8 {
		t.Fatalf("Parse(command) = %+v, %v; want a command", h, err)
	}
	if s := h.String(); s != "command ipmitool" {
		t.Errorf("command String() = %q: want the program's name only (arguments may hold a password)", s)
	}
	for _, bad := range []string{"", "http://", "https:///path", "a 'b"} {
		if h, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %+v; want an error", bad, h)
		}
	}
}

func TestVarsEnv(t *testing.T) {
	v := Vars{Event: "start_lease", LeaseID: "l1", LeaseName: "train", ProjectID: "p1", ReservationID: "r1",
		HostID: "7", HostName: "compute-7", Start: time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC), End: time.Date(2030, 1, 1, 12, 30, 0, 0, time.UTC)}
	want := []string{"CLIMATE_EVENT=start_lease", "CLIMATE_LEASE_ID=l1", "CLIMATE_LEASE_NAME=train", "CLIMATE_PROJECT_ID=p1",
		"CLIMATE_RESERVATION_ID=r1", "CLIMATE_HOST_ID=7", "CLIMATE_HOST_NAME=compute-7",
		"CLIMATE_START=2030-01-01T10:00:00Z", "CLIMATE_END=2030-01-01T12:30:00Z", "CLIMATE_ACTION_ID=" + v.ActionID()}
	if got := v.Env(); !reflect.DeepEqual(got, want) {
		t.Errorf("Env:\n got %q\nwant %q", got, want)
	}
	// The action id is the same for every run of one host's event, and differs between hosts and events.
	w := v
	w.LeaseName = "renamed"
	if v.ActionID() != w.ActionID() || len(v.ActionID()) != 32 {
		t.Errorf("action id %q changes with the lease name, or is not 32 hex digits", v.ActionID())
	}
	for _, o := range []Vars{{Event: "end_lease", LeaseID: "l1", ReservationID: "r1", HostID: "7"}, {Event: "start_lease", LeaseID: "l1", ReservationID: "r1", HostID: "8"}} {
		if o.ActionID() == v.ActionID() {
			t.Errorf("%+v has the same action id as %+v", o, v)
		}
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	tl := &tail{max: 100}
	for i := 0; i < 10000; i++ {
		tl.Write([]byte("noise line\n"))
	}
	tl.Write([]byte("the last word\n\n"))
	if len(tl.b) > 2*tl.max {
		t.Errorf("kept %d bytes, want at most %d", len(tl.b), 2*tl.max)
	}
	if got := tl.lastLine(); got != "the last word" {
		t.Errorf("lastLine = %q", got)
	}
	long := &tail{max: 4096}
	long.Write([]byte(strings.Repeat("x", 3000)))
	if got := long.lastLine(); len(got) > maxMessage+len("…") {
		t.Errorf("lastLine of a 3000-byte line is %d bytes, want at most %d", len(got), maxMessage)
	}
}
