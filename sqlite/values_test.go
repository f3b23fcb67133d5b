package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"climate"
)

// A multi-row insert binds the values its rows share once and the others a row each:
// every row reads back as it was given, whichever columns are shared, NULLs and blobs
// included, and so does a single row. The second set of rows has the first's shape but
// shares other columns, so a VALUES text kept for the first (valuesText) must not serve it.
func TestInsertRowsSharingValues(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "climate.db"))
	defer s.Close()
	for _, rows := range [][][]any{{
		{"l1", int64(1), nil, 1.5, []byte("x"), true},
		{"l1", int64(2), nil, 1.5, []byte("x"), true},
		{"l2", int64(2), nil, 1.5, []byte("y"), true},
	}, {
		{"l3", int64(7), "n", 2.5, []byte("x"), false},
		{"l3", int64(7), "n", 3.5, []byte("x"), false},
		{"l3", int64(7), "m", 4.5, []byte("y"), false},
	}} {
		insertAndReadBack(t, s, rows)
	}
}

// insertAndReadBack inserts the first 3 rows, then the first alone, with insertRows in a
// transaction it rolls back, and checks each reads back as given.
func insertAndReadBack(t *testing.T, s *Store, rows [][]any) {
	ctx := context.Background()
	for _, n := range []int{3, 1} {
		var args []any
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		var got [][]any
		err := s.Update(ctx, func(wtx climate.Tx) error {
			w := wtx.(*tx)
			if _, err := w.q.ExecContext(ctx, `CREATE TABLE scratch (a, b, c, d, e, f)`); err != nil {
				return err
			}
			if err := w.insertRows(ctx, "scratch", "a, b, c, d, e, f", 6, args); err != nil {
				return err
			}
			r, err := w.q.QueryContext(ctx, `SELECT a, b, c, d, e, f FROM scratch ORDER BY rowid`)
			if err != nil {
				return err
			}
			defer r.Close()
			for r.Next() {
				row := make([]any, 6)
				ptrs := make([]any, 6)
				for i := range row {
					ptrs[i] = &row[i]
				}
				if err := r.Scan(ptrs...); err != nil {
					return err
				}
				if row[5] != nil { // booleans come back as integers
					row[5] = row[5] == int64(1)
				}
				got = append(got, row)
			}
			if err := r.Err(); err != nil {
				return err
			}
			return fmt.Errorf("roll back the scratch table")
		})
		if err == nil || err.Error() != "roll back the scratch table" {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, rows[:n]) {
			t.Errorf("%d rows: read back %v, want %v", n, got, rows[:n])
		}
	}
}
