package sqlite

import (
	"errors"
	"path/filepath"
	"testing"
)

// One engine lock per database: a second taker is refused until the first releases it.
func TestLockEngineAdmitsOneHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "climate.db")
	release, err := LockEngine(path)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("no flock on this system")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockEngine(path); !errors.Is(err, ErrEngineLocked) {
		t.Fatalf("second LockEngine: %v; want ErrEngineLocked", err)
	}
	other, err := LockEngine(filepath.Join(t.TempDir(), "climate.db"))
	if err != nil {
		t.Fatalf("another database's lock: %v", err)
	}
	defer other()
	if err := release(); err != nil {
		t.Fatal(err)
	}
	again, err := LockEngine(path)
	if err != nil {
		t.Fatalf("LockEngine after release: %v", err)
	}
	again()
}
