package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables of TestDSN.
const (
	// TestEnv holds the URL of a database tests may create schemas in, e.g.
	// postgres://postgres@127.0.0.1:5432/test.
	TestEnv = "CLIMATE_TEST_POSTGRES"
	// TestRequiredEnv, set to 1, makes tests fail instead of skip without TestEnv (CI).
	TestRequiredEnv = "CLIMATE_TEST_POSTGRES_REQUIRED"
)

// TestDSN creates a fresh, empty schema in the test database and returns a DSN whose
// search_path selects it; the schema is dropped (CASCADE) when the test ends, after the
// test's own cleanups (close stores first). Tests using it can run in parallel. Without
// CLIMATE_TEST_POSTGRES the test is skipped, or fails if CLIMATE_TEST_POSTGRES_REQUIRED=1.
func TestDSN(t testing.TB) string {
	t.Helper()
	return testDSN(t, true)
}

// testDSN is TestDSN; with create false the schema is left for Open to create.
func testDSN(t testing.TB, create bool) string {
	t.Helper()
	base := os.Getenv(TestEnv)
	if base == "" {
		if os.Getenv(TestRequiredEnv) == "1" {
			t.Fatalf("%s is not set, and %s=1 requires PostgreSQL tests", TestEnv, TestRequiredEnv)
		}
		t.Skipf("PostgreSQL tests need %s (e.g. postgres://postgres@127.0.0.1:5432/test)", TestEnv)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: not a URL: %v", TestEnv, err)
	}
	schema := "climate_test_" + randomHex(8)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	dsn := u.String()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", TestEnv, err)
	}
	defer conn.Close(ctx)
	if create {
		if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
			t.Fatalf("create schema %s: %v", schema, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return dsn
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
