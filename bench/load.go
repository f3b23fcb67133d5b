package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"climate"
	"climate/workload"
)

// LoadOptions are bench load's settings.
type LoadOptions struct {
	Hosts, Leases int
	DataDir       string
	Database      string
	Open          StoreOpener
}

// benchLoadResult is what loading a book took.
type benchLoadResult struct {
	Hosts, Leases, Allocations int
	GenerateSeconds            float64
	LoadSeconds                float64
}

// Load runs bench load: it writes the book into the store and says so on stdout.
func Load(ctx context.Context, o *LoadOptions, stdout, stderr io.Writer) error {
	if o.Hosts <= 0 || o.Leases < 0 {
		return fmt.Errorf("--hosts %d --leases %d: want at least one host and no negative lease count", o.Hosts, o.Leases)
	}
	st, path, err := o.Open(ctx, o.Database, o.DataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := loadFreshBook(ctx, st, path, benchScale{o.Hosts, o.Leases}, workload.Generate, stderr)
	if err != nil {
		return err
	}
	if err := vacuumDatabase(ctx, st, &progressLine{w: stderr}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Loaded %d hosts, %d leases, %d host allocations into %s in %.2f s (generating the book took %.2f s)\n",
		res.Hosts, res.Leases, res.Allocations, path, res.LoadSeconds, res.GenerateSeconds)
	return nil
}

// loadFreshBook is loadBook into a store that must hold no hosts yet (the book's ids are
// fixed); desc names the store in the error.
func loadFreshBook(ctx context.Context, st climate.Store, desc string, sc benchScale, gen bookGenerator, stderr io.Writer) (*benchLoadResult, error) {
	var existing int
	err := st.View(ctx, func(tx climate.Tx) error {
		hosts, err := tx.ListHosts(ctx)
		existing = len(hosts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", desc, err)
	}
	if existing > 0 {
		return nil, fmt.Errorf("%s already holds %d hosts; the workload's host ids would collide: load into a fresh --data-dir or PostgreSQL schema", desc, existing)
	}
	return loadBook(ctx, st, sc, gen, stderr)
}

// bookGenerator builds a workload book of h hosts and r leases: workload.Generate
// (blazar-90d) or workload.GenerateInstances.
type bookGenerator func(h, r int) *workload.Book

// loadBook generates a book with gen and writes it into st, showing progress on stderr.
func loadBook(ctx context.Context, st climate.Store, sc benchScale, gen bookGenerator, stderr io.Writer) (*benchLoadResult, error) {
	p := &progressLine{w: stderr}
	p.set("generating the book: %d hosts, %d leases", sc.hosts, sc.leases)
	t0 := time.Now()
	book := gen(sc.hosts, sc.leases)
	res := &benchLoadResult{Hosts: len(book.Hosts), Leases: len(book.Leases), Allocations: book.Allocations(),
		GenerateSeconds: round(time.Since(t0).Seconds(), 3)}
	p.set("loading %d hosts", len(book.Hosts))
	t0 = time.Now()
	err := workload.Load(ctx, st, book, loadProgress(p))
	p.done()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, errors.New("interrupted while loading; the database holds part of the book")
		}
		return nil, fmt.Errorf("load: %w", err)
	}
	res.LoadSeconds = round(time.Since(t0).Seconds(), 3)
	return res, nil
}
