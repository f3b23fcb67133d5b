package postgres

import (
	"strings"
	"sync"
	"testing"
)

// Replicas started together all run the migrations: every Open must succeed and each
// migration must be applied exactly once, on a schema that did not exist yet.
func TestConcurrentMigrate(t *testing.T) {
	dsn := testDSN(t, false)
	const n = 8
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			stores[i], errs[i] = Open(ctx, dsn)
		}()
	}
	close(ready)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		} else {
			defer stores[i].Close()
		}
	}
	if t.Failed() {
		return
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	s := stores[0]
	if err := s.Migrate(ctx); err != nil { // idempotent
		t.Fatalf("Migrate again: %v", err)
	}
	var count, distinct int
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&count, &distinct); err != nil {
		t.Fatal(err)
	}
	if count != len(ms) || distinct != len(ms) {
		t.Errorf("schema_migrations: %d rows, %d versions; want each of the %d migrations once", count, distinct, len(ms))
	}
	// The tables are in the test's own schema, and btree_gist is not.
	var tableSchema, extSchema string
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT table_schema FROM information_schema.tables WHERE table_name = 'allocations' AND table_schema = $1),
		(SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'btree_gist')`, s.schema).Scan(&tableSchema, &extSchema); err != nil {
		t.Fatal(err)
	}
	if tableSchema != s.schema || extSchema != "public" {
		t.Errorf("allocations in schema %q, btree_gist in %q; want %q and public", tableSchema, extSchema, s.schema)
	}
}

func TestParseConfigSearchPath(t *testing.T) {
	tests := []struct {
		dsn, schema, path string
	}{
		{"postgres://u@h/db?search_path=foo", "foo", "foo, public"},
		{"postgres://u@h/db?search_path=Foo,public", "foo", "Foo,public"},
		{`postgres://u@h/db?search_path=%22My%20Schema%22`, "My Schema", `"My Schema", public`},
		{"postgres://u@h/db?search_path=%24user", "u", "$user, public"},
		{"postgres://u@h/db", "", ""},
	}
	for _, tc := range tests {
		cfg, schema, err := parseConfig(tc.dsn)
		if err != nil {
			t.Errorf("%s: %v", tc.dsn, err)
			continue
		}
		if path := cfg.ConnConfig.RuntimeParams["search_path"]; schema != tc.schema || path != tc.path {
			t.Errorf("%s: schema %q, search_path %q; want %q, %q", tc.dsn, schema, path, tc.schema, tc.path)
		}
	}
	// A bad URL's error must not show its password.
	if _, _, err := parseConfig("postgres://u:s3cret@h:notaport/db"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad URL: %v; want an error without the password", err)
	}
}
