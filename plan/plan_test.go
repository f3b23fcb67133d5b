package plan

import (
	"strings"
	"testing"
	"time"

	"climate"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func hr(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }

func hosts(n int) []climate.Host {
	out := make([]climate.Host, n)
	for i := range out {
		out[i] = climate.Host{ID: string(rune('a' + i)), Reservable: true, Extra: map[string]string{}}
	}
	return out
}

func TestPlaceHosts(t *testing.T) {
	base := hosts(5) // a b c d e
	base[3].Reservable = false
	base[4].Extra["gpu"] = "true"
	busy := []climate.Allocation{
		{LeaseID: "L1", ResourceID: "a", Start: hr(0), End: hr(10)},  // overlaps [5,15)
		{LeaseID: "L2", ResourceID: "b", Start: hr(15), End: hr(20)}, // back-to-back: free
	}
	gpu := func(h *climate.Host) bool { return h.Extra["gpu"] == "true" }
	w := Window{hr(5), hr(15)}
	cases := []struct {
		name    string
		req     HostRequest
		want    string
		wantErr string
	}{
		{"takes free hosts in inventory order", HostRequest{Window: w, Min: 1, Max: 2}, "b,c", ""},
		{"max bounds the result", HostRequest{Window: w, Min: 1, Max: 1}, "b", ""},
		{"returns what exists between min and max", HostRequest{Window: w, Min: 2, Max: 5}, "b,c,e", ""},
		{"filter", HostRequest{Window: w, Min: 1, Max: 3, Match: gpu}, "e", ""},
		{"prefer keeps given hosts first", HostRequest{Window: w, Min: 1, Max: 2, Prefer: []string{"e", "a"}}, "e,b", ""},
		{"exclude", HostRequest{Window: w, Min: 1, Max: 3, Exclude: map[string]bool{"b": true}}, "c,e", ""},
		{"busy host is free outside its window; tightest fit first", HostRequest{Window: Window{hr(10), hr(12)}, Min: 4, Max: 4}, "a,b,c,e", ""},
		{"best fit fills the gap before b", HostRequest{Window: Window{hr(11), hr(15)}, Min: 1, Max: 1}, "b", ""},
		{"ties go to the first scanned", HostRequest{Window: w, Min: 1, Max: 1, Exclude: map[string]bool{"b": true}}, "c", ""},
		{"rotate starts the scan elsewhere", HostRequest{Window: w, Min: 1, Max: 1, Exclude: map[string]bool{"b": true}, Rotate: 3}, "e", ""},
		{"rotate wraps around", HostRequest{Window: w, Min: 2, Max: 2, Exclude: map[string]bool{"b": true}, Rotate: 3}, "e,c", ""},
		{"negative rotate", HostRequest{Window: w, Min: 1, Max: 1, Exclude: map[string]bool{"b": true}, Rotate: -1}, "e", ""},
		{"rotate keeps best fit", HostRequest{Window: w, Min: 1, Max: 1, Rotate: 3}, "b", ""},
		{"own lease does not count on update", HostRequest{Window: w, Min: 3, Max: 3, Lease: "L1"}, "b,a,c", ""},
		{"shortage explains counts", HostRequest{Window: w, Min: 4, Max: 4, Match: func(h *climate.Host) bool { return h.ID != "c" }},
			"", "Not enough hosts available: 4 requested, 2 free in the window; of 5 registered hosts 1 do not match the properties, 1 are not reservable, 0 are taken by this lease and 1 are booked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := NewIndex(base, busy).PlaceHosts(tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || climate.ErrorCode(err) != climate.CodeConflict {
					t.Fatalf("err = %v, want conflict containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := strings.Join(got, ","); s != tc.want {
				t.Fatalf("got %s, want %s", s, tc.want)
			}
		})
	}
}
