package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"climate"
	"climate/postgres"
	"climate/sqlite"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// climateBinaryForTest builds the climate binary once per test run: the benchmark runs it
// as "serve" and "bench soak-attack".
func climateBinaryForTest(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the climate binary")
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "climate-bench-bin"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "climate")
		if out, err := exec.Command("go", "build", "-o", binPath, "climate/cmd/climate").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binPath
}

// serveDataDir starts "climate serve" on the SQLite database in dir, stopped when the
// test ends, and returns its URL.
func serveDataDir(t *testing.T, dir string) string {
	t.Helper()
	s, err := StartServer(context.Background(), climateBinaryForTest(t), []string{"--data-dir", dir, "--log-level", "error"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.URL
}

// runAPIForTest runs bench api with o, its flags' defaults where o leaves them zero.
func runAPIForTest(t *testing.T, o APIOptions) *APIReport {
	t.Helper()
	if o.Kind == "" {
		o.Kind = "plain"
	}
	if o.Type == "" {
		o.Type = "host"
	}
	if o.Addresses == 0 {
		o.Addresses = 1000
	}
	if o.Replicas == nil {
		o.Replicas = []int{1}
	}
	o.Open = openForTest
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := runAPI(ctx, &o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// openForTest is the StoreOpener of the tests: SQLite in dataDir, or PostgreSQL.
func openForTest(ctx context.Context, database, dataDir string) (climate.Store, string, error) {
	if database != "" {
		st, err := postgres.Open(ctx, database)
		return st, "PostgreSQL", err
	}
	path := filepath.Join(dataDir, "climate.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, "", err
	}
	return st, path, nil
}
