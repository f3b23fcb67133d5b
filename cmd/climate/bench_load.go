package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"climate"
	"climate/workload"
)

type benchLoadOptions struct {
	hosts, leases int
	dataDir       string
	database      string
}

// benchLoadResult is what bench load reports.
type benchLoadResult struct {
	Hosts, Leases, Allocations int
	GenerateSeconds            float64
	LoadSeconds                float64
	Path                       string
}

func newBenchLoadCmd() *cobra.Command {
	o := &benchLoadOptions{}
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Write the workload's hosts and leases into a data directory's database",
		Long: `Generate the blazar-90d book of H hosts and R existing leases and write it into the
SQLite database of a data directory, the same file "climate serve" uses. The server may be
running: SQLite's WAL lets this process write alongside it, and the server notices the new
hosts and allocations through the store's revisions on its next request.

The book's host and lease ids are fixed by the workload, so it can only be loaded into a
database without hosts: use a fresh --data-dir (or PostgreSQL schema, with --database) for
each book.`,
		Example: `  # A 5,000-host book with 50,000 leases, then serve it
  climate bench load --hosts 5000 --leases 50000 --data-dir /tmp/climate-5k
  climate serve --data-dir /tmp/climate-5k

  # The same into a PostgreSQL schema
  climate bench load --hosts 5000 --leases 50000 --database 'postgres://climate@db/climate?search_path=bench'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := runBenchLoad(ctx, o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Loaded %d hosts, %d leases, %d host allocations into %s in %.2f s (generating the book took %.2f s)\n",
				res.Hosts, res.Leases, res.Allocations, res.Path, res.LoadSeconds, res.GenerateSeconds)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.hosts, "hosts", 5000, "number of hosts H")
	f.IntVar(&o.leases, "leases", 50000, "number of existing leases R")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "directory holding the SQLite database (climate.db)")
	addDatabaseFlag(f, &o.database)
	addDataDirHelp(cmd)
	return cmd
}

func runBenchLoad(ctx context.Context, o *benchLoadOptions, stderr io.Writer) (*benchLoadResult, error) {
	if o.hosts <= 0 || o.leases < 0 {
		return nil, fmt.Errorf("--hosts %d --leases %d: want at least one host and no negative lease count", o.hosts, o.leases)
	}
	st, path, err := openDatabase(ctx, o.database, o.dataDir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	res, err := loadFreshBook(ctx, st, path, benchScale{o.hosts, o.leases}, workload.Generate, stderr)
	if err != nil {
		return nil, err
	}
	res.Path = path
	return res, nil
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
