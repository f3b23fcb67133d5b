package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"climate/postgres"
)

// Two replicas on one PostgreSQL schema: a lease created through an API-only replica is
// started on time by the other replica's engine, which only WatchEvents can wake early
// enough (its fallback sleep is 30 s, the deadline here 20 s).
func TestServeOnPostgres(t *testing.T) {
	dsn := postgres.TestDSN(t)
	engineReplica := startServer(t, serveOptions{database: dsn})
	api := startServer(t, serveOptions{database: dsn, role: "api"})

	post(t, api.url+"/v1/os-hosts", `{"name": "n1"}`, 201)
	start := time.Now().UTC().Add(time.Second).Format(time.RFC3339Nano)
	end := time.Now().UTC().Add(time.Hour).Format("2006-01-02 15:04:05")
	body := post(t, api.url+"/v1/leases", `{"name": "r", "start_date": "`+start+`", "end_date": "`+end+`",
		"reservations": [{"resource_type": "physical:host", "min": 1, "max": 1, "hypervisor_properties": "", "resource_properties": ""}]}`, 201)
	id := body["lease"].(map[string]any)["id"].(string)

	// Both replicas see the same data.
	hosts := get(t, engineReplica.url+"/v1/os-hosts")["hosts"].([]any)
	if len(hosts) != 1 {
		t.Fatalf("hosts seen by the other replica: %v", hosts)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status := get(t, api.url+"/v1/leases/"+id)["lease"].(map[string]any)["status"]
		if status == "ACTIVE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease is %v; the engine replica was not woken", status)
		}
		time.Sleep(50 * time.Millisecond) // polling the API as a client would; the engine is not observable otherwise
	}

	if err := api.stop(); err != nil { // the output is complete (and safe to read) once stopped
		t.Fatal(err)
	}
	if out := api.output.String(); !strings.Contains(out, "Data: "+dsn+"\n") {
		t.Errorf("output does not name the database:\n%s", out)
	}
}

func TestMigrateOnPostgres(t *testing.T) {
	dsn := postgres.TestDSN(t)
	for range 2 { // idempotent
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"migrate", "--database", dsn})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("climate migrate: %v", err)
		}
		if want := "Database " + dsn + " is up to date\n"; out.String() != want {
			t.Errorf("output %q, want %q", out.String(), want)
		}
	}
}

// --database must be a PostgreSQL URL, and a password in it is never shown.
func TestDatabaseFlagErrors(t *testing.T) {
	for _, database := range []string{"mysql://root:s3cret@db/climate", "host=db password=s3cret", "://s3cret"} {
		o := serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "all", logLevel: "error", dataDir: t.TempDir(), database: database}
		err := runServe(context.Background(), &o, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--database: want a postgres:// or postgresql:// URL") ||
			strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("--database %q: %v; want one line saying what is expected, without the password", database, err)
		}
	}
	// Nothing listens on port 1: the connection error names the database, not the password.
	o := serveOptions{listen: "127.0.0.1:0", auth: "noauth", role: "all", logLevel: "error", dataDir: t.TempDir(),
		database: "postgres://climate:s3cret@127.0.0.1:1/climate?connect_timeout=5"}
	err := runServe(context.Background(), &o, io.Discard)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "postgres://climate:xxxxx@127.0.0.1:1/climate") {
		t.Errorf("unreachable database: %v; want an error naming it without the password", err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:s3cret@h/db?search_path=s":            "postgres://u:xxxxx@h/db?search_path=s",
		"postgres://u@h/db?password=s3cret&sslmode=require": "postgres://u@h/db?password=xxxxx&sslmode=require",
		"postgresql://h/db?sslpassword=s3cret":              "postgresql://h/db?sslpassword=xxxxx",
		"postgres://u@h/db":                                 "postgres://u@h/db",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := redactURL(u); got != want {
			t.Errorf("redactURL(%s) = %s, want %s", in, got, want)
		}
	}
}

// One replica at a time maintains the database; the others find the lead taken.
func TestMaintainOncePerDatabase(t *testing.T) {
	dsn := postgres.TestDSN(t)
	var replicas []*postgres.Store
	for range 2 {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		replicas = append(replicas, st)
	}
	for round := range 2 {
		for i, want := range []bool{true, false} {
			did, err := maintainOnce(context.Background(), replicas[i], fmt.Sprint("replica-", i))
			if err != nil || did != want {
				t.Errorf("round %d, replica %d: maintained %v, %v; want %v", round, i, did, err, want)
			}
		}
	}
}
