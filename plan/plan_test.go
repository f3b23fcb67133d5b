package plan

import (
	"math/rand"
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
	busy := map[string][]Window{
		"a": {{hr(0), hr(10)}},  // overlaps [5,15)
		"b": {{hr(15), hr(20)}}, // back-to-back: free
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
		{"busy host is free outside its window", HostRequest{Window: Window{hr(10), hr(12)}, Min: 4, Max: 4}, "a,b,c,e", ""},
		{"shortage explains counts", HostRequest{Window: w, Min: 4, Max: 4, Match: func(h *climate.Host) bool { return h.ID != "c" }},
			"", "Not enough hosts available: 4 requested, 2 free in the window; of 5 registered hosts 1 do not match the properties, 1 are not reservable, 0 are taken by this lease and 1 are booked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := PlaceHosts(&Snapshot{Hosts: base, Busy: busy}, tc.req)
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

// TestPlansNeverOverlap books random requests one after another, feeding each plan back
// into the busy map, and checks no host ever holds two overlapping windows.
func TestPlansNeverOverlap(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	snap := &Snapshot{Hosts: hosts(12), Busy: map[string][]Window{}}
	booked := 0
	for i := 0; i < 2000; i++ {
		s := rng.Intn(500)
		w := Window{hr(s), hr(s + 1 + rng.Intn(48))}
		min := 1 + rng.Intn(4)
		got, _, err := PlaceHosts(snap, HostRequest{Window: w, Min: min, Max: min + rng.Intn(3)})
		if err != nil {
			continue
		}
		if len(got) < min {
			t.Fatalf("got %d hosts, min %d", len(got), min)
		}
		for _, h := range got {
			for _, b := range snap.Busy[h] {
				if climate.Overlaps(b.Start, b.End, w.Start, w.End) {
					t.Fatalf("plan %d put %s on an overlapping window", i, h)
				}
			}
			snap.Busy[h] = append(snap.Busy[h], w)
		}
		booked++
	}
	if booked < 100 {
		t.Fatalf("only %d requests booked; the test exercises too little", booked)
	}
}
