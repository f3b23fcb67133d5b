package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"climate"
	"climate/sqlite"
	"climate/workload"
)

// load runs bench load of hosts and leases into the SQLite database of dir.
func load(t *testing.T, dir string, hosts, leases int) (stdout, stderr string, err error) {
	t.Helper()
	var out, errs bytes.Buffer
	err = Load(context.Background(), &LoadOptions{Hosts: hosts, Leases: leases, DataDir: dir, Open: openForTest}, &out, &errs)
	return out.String(), errs.String(), err
}

func TestBenchLoadWritesBookAndRefusesSecondBook(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := load(t, dir, 30, 100)
	if err != nil {
		t.Fatal(err)
	}
	book := workload.Generate(30, 100)
	if want := fmt.Sprintf("Loaded 30 hosts, 100 leases, %d host allocations into %s in ", book.Allocations(), filepath.Join(dir, "climate.db")); !strings.HasPrefix(stdout, want) {
		t.Errorf("summary: %q", stdout)
	}
	if !strings.Contains(stderr, "loading leases 100/100 (100%)") {
		t.Errorf("progress: %q", stderr)
	}
	hosts, leases, allocs := countStore(t, dir)
	if hosts != 30 || leases != 100 || allocs != book.Allocations() {
		t.Fatalf("database holds %d hosts, %d leases, %d allocations; want 30, 100, %d", hosts, leases, allocs, book.Allocations())
	}

	_, _, err = load(t, dir, 30, 100)
	if err == nil || !strings.Contains(err.Error(), "already holds 30 hosts") || !strings.Contains(err.Error(), "fresh --data-dir") {
		t.Fatalf("second load: %v", err)
	}
	if h, l, _ := countStore(t, dir); h != 30 || l != 100 {
		t.Fatalf("after the refused load: %d hosts, %d leases", h, l)
	}
}

func countStore(t *testing.T, dir string) (hosts, leases, allocs int) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "climate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.View(ctx, func(tx climate.Tx) error {
		h, err := tx.ListHosts(ctx)
		if err != nil {
			return err
		}
		l, err := tx.ListLeases(ctx, climate.LeaseFilter{})
		if err != nil {
			return err
		}
		a, err := tx.ListAllocations(ctx, climate.AllocationFilter{})
		hosts, leases, allocs = len(h), len(l), len(a)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hosts, leases, allocs
}
