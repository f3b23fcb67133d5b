package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"climate/http/api"
)

func TestParseDate(t *testing.T) {
	base := time.Date(2030, 1, 2, 10, 0, 30, 0, time.UTC)
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for _, tc := range []struct {
		in   string
		want time.Time
		now  bool
	}{
		{in: "now", now: true},
		{in: "+2h", want: utc("2030-01-02T12:00:30Z")},
		{in: "+1d12h", want: utc("2030-01-03T22:00:30Z")},
		{in: "+90m", want: utc("2030-01-02T11:30:30Z")},
		{in: "2030-05-06 07:08", want: utc("2030-05-06T07:08:00Z")},
		{in: " 2030-05-06 07:08:09 ", want: utc("2030-05-06T07:08:09Z")},
		{in: "2030-05-06T07:08:09+02:00", want: utc("2030-05-06T05:08:09Z")},
		{in: "2030-05-06T07:08", want: utc("2030-05-06T07:08:00Z")},
		{in: "2030-05-06T07:08:09.000000", want: utc("2030-05-06T07:08:09Z")},
		{in: "2030-05-06", want: utc("2030-05-06T00:00:00Z")},
	} {
		got, now, err := parseDate("start-date", tc.in, base)
		if err != nil || now != tc.now || !got.Equal(tc.want) {
			t.Errorf("parseDate(%q) = %v, %v, %v; want %v, %v", tc.in, got, now, err, tc.want, tc.now)
		}
	}
	for _, bad := range []string{"", "tomorrow", "+", "+2", "+-1h", "2030-13-01 00:00", "06/05/2030", "+2 hours"} {
		if _, _, err := parseDate("start-date", bad, base); err == nil || !strings.HasPrefix(err.Error(), "--start-date ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseDate(%q): error %v, want a one-line --start-date error", bad, err)
		}
	}
}

func TestParseReservation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]any
	}{
		{"resource_type=physical:host,min=1,max=2", map[string]any{"resource_type": "physical:host", "min": 1, "max": 2}},
		// Values may contain commas and '=' (JSON filters).
		{`resource_type=physical:host,min=1,max=1,resource_properties=["and",["==","$a","1"],[">=","$b","2"]],hypervisor_properties=[">=","$memory_mb","4096"]`,
			map[string]any{"resource_type": "physical:host", "min": 1, "max": 1,
				"resource_properties":   `["and",["==","$a","1"],[">=","$b","2"]]`,
				"hypervisor_properties": `[">=","$memory_mb","4096"]`}},
		{"id=42,max=3", map[string]any{"id": "42", "max": 3}},
		{`resource_type=virtual:floatingip,network_id=net-1,amount=2,required_floatingips=["172.24.4.10"]`,
			map[string]any{"resource_type": "virtual:floatingip", "network_id": "net-1", "amount": 2, "required_floatingips": []string{"172.24.4.10"}}},
		{"resource_type=flavor:instance,vcpus=2,memory_mb=4096,disk_gb=10,amount=3,affinity=false",
			map[string]any{"resource_type": "flavor:instance", "vcpus": 2, "memory_mb": 4096, "disk_gb": 10, "amount": 3, "affinity": "false"}},
	} {
		got, err := parseReservation("reservation", tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseReservation(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for bad, want := range map[string]string{
		"":                                "is empty",
		"min":                             "want KEY=VALUE",
		"colour=red":                      `unknown key "colour"`,
		"min=1,min=2":                     "min is given twice",
		"required_floatingips=10.0.0.1":   "not a JSON list",
		"resource_type=physical:host,x=1": `unknown key "x"`,
	} {
		if _, err := parseReservation("reservation", bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseReservation(%q): %v, want %q", bad, err, want)
		}
	}
}

func TestLeaseCreateRequest(t *testing.T) {
	now := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	lo := &leaseCreateOptions{start: "2030-02-01 08:00", end: "+6h", beforeEnd: "-1h", reservations: []string{"resource_type=physical:host,min=1,max=1"}}
	req, err := lo.request("x", now)
	if err != nil || req.StartDate != "2030-02-01T08:00:00Z" || req.EndDate != "2030-02-01T14:00:00Z" || req.BeforeEndDate != "2030-02-01T13:00:00Z" {
		t.Fatalf("request: %v %+v", err, req)
	}
	// The default end is a day after the start, as in Blazar.
	lo = &leaseCreateOptions{start: "now", reservations: []string{"resource_type=physical:host,min=1,max=1"}}
	if req, err = lo.request("x", now); err != nil || req.StartDate != "now" || req.EndDate != "2030-01-03T10:00:00Z" {
		t.Fatalf("default end: %v %+v", err, req)
	}
	lo = &leaseCreateOptions{start: "earliest", duration: "2d", deadline: "2030-03-01 00:00", reservations: []string{"resource_type=physical:host,min=1,max=1"}}
	if req, err = lo.request("x", now); err != nil || req.StartDate != "earliest" || req.Duration != "2d" || req.Deadline != "2030-03-01T00:00:00Z" || req.EndDate != "" {
		t.Fatalf("earliest: %v %+v", err, req)
	}
}

func TestLeaseUpdateRequest(t *testing.T) {
	l := &api.Lease{ID: "L", Name: "x", StartDate: "2030-01-02T10:00:00.000000", EndDate: "2030-01-02T12:00:00.000000"}
	for _, tc := range []struct {
		opts       leaseUpdateOptions
		start, end string
	}{
		{leaseUpdateOptions{prolong: "1d"}, "", "2030-01-03T12:00:00Z"},
		{leaseUpdateOptions{reduce: "30m"}, "", "2030-01-02T11:30:00Z"},
		{leaseUpdateOptions{deferBy: "2h"}, "2030-01-02T12:00:00Z", ""},
		{leaseUpdateOptions{advance: "1h", prolong: "1h"}, "2030-01-02T09:00:00Z", "2030-01-02T13:00:00Z"},
		// A relative end date counts from the new start.
		{leaseUpdateOptions{start: "2030-01-05 00:00", end: "+3h"}, "2030-01-05T00:00:00Z", "2030-01-05T03:00:00Z"},
	} {
		u, err := tc.opts.update(l)
		if err != nil || u.StartDate != tc.start || u.EndDate != tc.end {
			t.Errorf("%+v: %v start %q end %q; want %q %q", tc.opts, err, u.StartDate, u.EndDate, tc.start, tc.end)
		}
	}
}
