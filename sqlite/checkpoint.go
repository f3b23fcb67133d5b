package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"modernc.org/sqlite"
)

// Checkpoints. In WAL mode SQLite's committing connection copies the WAL back into the
// database file once the WAL holds wal_autocheckpoint pages, and syncs both files: the
// commit that crosses the line waits for two fsyncs, which took most of a write's time
// on the project's machine (BenchmarkCreateLeaseConcurrent). Here a goroutine with a
// connection of its own runs PASSIVE checkpoints beside the writer, which goes on
// committing meanwhile; the writer's own automatic checkpoint stays as a safety net, at a
// WAL size the background one keeps it from reaching.

// checkpointFrames is how many WAL frames (pages) the writer writes between two requests
// for a background checkpoint (requests coalesce while one runs): 4 MiB of WAL, SQLite's
// own default (wal_autocheckpoint 1,000). A checkpoint copies each page once however many
// frames of it the WAL holds, so the longer the WAL the fewer copies of the pages that
// come back frame after frame (the index pages creations append to, the random ones of
// the index by host); but a longer checkpoint is a longer burst that the writer and the
// requests share the two cores with. bench api, H=5,000, 16 clients, server CPU a
// creation against 330 frames (about what 8 transactions held, as before) in rounds of
// alternating runs, and p99: 330 frames, 37-44 ms; 1,024, -1 to -9%, 45-53 ms; 2,048,
// +4 to -15%, 57-77 ms; 8,192, -4 to -13%, 86-91 ms (docs/performance-log.md, eighth
// session). Frames, not transactions, since a transaction holds from one request (about
// 45 frames) to a batch of 64.
const checkpointFrames = 1024

// autoCheckpointPages is the writer's own wal_autocheckpoint (80 MiB of 4 KiB pages),
// above checkpointFrames and a batch of 64 requests' frames.
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

// walWritten asks for a checkpoint once the writer has written checkpointFrames frames
// since it last asked, given how many it has written in all. The writer goroutine's alone.
func (s *Store) walWritten(frames int64) {
	if frames < s.ckptAskedAt { // a new connection counts from 0
		s.ckptAskedAt = frames
	}
	if frames-s.ckptAskedAt < checkpointFrames {
		return
	}
	s.ckptAskedAt = frames
	select {
	case s.ckptWanted <- struct{}{}:
	default: // one is running or asked for already
	}
}

// framesWritten returns how many WAL frames the writer connection has written
// (sqlite3_db_status's CACHE_WRITE: in WAL mode, the pages its commits appended). Called
// between batches, when the connection is free.
func (s *Store) framesWritten(ctx context.Context) (int64, error) {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var n int
	err = c.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return fmt.Errorf("sqlite: %T has no sqlite3_db_status", dc)
		}
		n, _, err = st.Status(sqlite.DBStatusCacheWrite, false)
		return err
	})
	return int64(n), err
}
