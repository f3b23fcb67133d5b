package sqlite

import (
	"context"
	"database/sql"
)

// Checkpoints. In WAL mode SQLite's committing connection copies the WAL back into the
// database file once the WAL holds wal_autocheckpoint pages, and syncs both files: the
// commit that crosses the line waits for two fsyncs, which took most of a write's time
// on the project's machine (BenchmarkCreateLeaseConcurrent). Here a goroutine with a
// connection of its own runs PASSIVE checkpoints beside the writer, which goes on
// committing meanwhile; the writer's own automatic checkpoint stays as a safety net, at a
// WAL size the background one keeps it from reaching.

// checkpointEvery is how many batches the writer commits between two requests for a
// background checkpoint (requests coalesce while one runs).
const checkpointEvery = 8

// autoCheckpointPages is the writer's own wal_autocheckpoint (80 MiB of 4 KiB pages).
const autoCheckpointPages = 20000

// startCheckpointer starts the background checkpoint goroutine on its own connection.
func (s *Store) startCheckpointer(path string) error {
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	s.ckpt = db
	s.ckptWanted = make(chan struct{}, 1)
	s.ckptDone = make(chan struct{})
	go func() {
		defer close(s.ckptDone)
		for {
			select {
			case <-s.ckptWanted:
			case <-s.closing:
				return
			}
			var busy, log, done int
			// Errors are left for the next round or the writer's own checkpoint: a
			// checkpoint only moves pages, it never loses them.
			_ = db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done)
		}
	}()
	return nil
}

// committed asks for a checkpoint every checkpointEvery write transactions, given how
// many there have been.
func (s *Store) committed(transactions int64) {
	if transactions%checkpointEvery != 0 {
		return
	}
	select {
	case s.ckptWanted <- struct{}{}:
	default: // one is running or asked for already
	}
}
