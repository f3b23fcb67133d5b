//go:build unix

package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"climate"
	"climate/sqlite"
)

// The database and the files SQLite makes beside it (-wal, -shm) are readable by their
// owner only, whatever the umask: they hold every project's leases.
func TestDatabaseFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, under which files were created 0644
	defer syscall.Umask(old)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // a data directory others may list
		t.Fatal(err)
	}
	path := filepath.Join(dir, "climate.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A write makes sure the -wal and -shm files exist.
	if err := st.Update(ctx, func(tx climate.Tx) error {
		return tx.InsertHost(ctx, &climate.Host{HypervisorHostname: "h", Reservable: true})
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"climate.db", "climate.db-wal", "climate.db-shm"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v, want no access for group or others", name, perm)
		}
	}
}
