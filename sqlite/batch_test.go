package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"climate"
	"climate/storetest"
)

// TestGroupCommitBatchWithConflicts: storetest.GroupCommit on the single writer.
func TestGroupCommitBatchWithConflicts(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	defer s.Close()
	storetest.GroupCommit(t, s, storetest.Queue{Waiting: s.writes.Waiting, Writes: s.Writes})
}

// TestUpdateAfterClose: an Update on a closed store fails at once, not for ever.
func TestUpdateAfterClose(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	s.Close()
	if err := s.Update(context.Background(), func(climate.Tx) error { return nil }); climate.ErrorCode(err) != climate.CodeInternal {
		t.Errorf("Update after Close: %v", err)
	}
}

// TestCloseTwice: closing a store again is harmless, as database/sql's Close is.
func TestCloseTwice(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()
}
