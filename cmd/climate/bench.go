package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"climate/bench"
)

// The bench commands are flags over the bench package, which runs them.

// newBenchCmd groups the benchmark commands of shared/bench/WORKLOAD.md ("blazar-90d").
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark host matching and lease creation on the blazar-90d workload",
		Long: `Benchmark Climate on the deterministic "blazar-90d" workload (shared/bench/WORKLOAD.md):
H hosts and R existing leases over 90 days, built bit-identically from splitmix64 streams,
then requests for 10 hosts over the workload's request windows.

  bench load   write a book into a data directory (for "climate serve" or your own tests)
  bench plan   time the planner in process (median/p99 per request, index size)
  bench api    time lease creation through the HTTP API of a server subprocess
  bench soak   hold thousands of idle and slow connections while a client keeps working`,
		Example: `  climate bench plan
  climate bench api --clients 1,4,16
  climate bench load --hosts 5000 --leases 50000 --data-dir /tmp/climate-5k`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchLoadCmd(), newBenchPlanCmd(), newBenchAPICmd(), newBenchSoakCmd(), newBenchSoakAttackCmd())
	return cmd
}

func newBenchLoadCmd() *cobra.Command {
	o := &bench.LoadOptions{Open: openDatabase}
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Write the workload's hosts and leases into a data directory's database",
		Long: `Generate the blazar-90d book of H hosts and R existing leases and write it into the
SQLite database of a data directory, the same file "climate serve" uses. The server may be
running: SQLite's WAL lets this process write alongside it, and the server notices the new
hosts and allocations through the store's revisions on its next request.

The book's host and lease ids are fixed by the workload, so it can only be loaded into a
database without hosts: use a fresh --data-dir (or PostgreSQL schema, with --database) for
each book. On PostgreSQL the schema's tables are vacuumed and analyzed once the book is in,
so the planner has statistics from the first request.`,
		Example: `  # A 5,000-host book with 50,000 leases, then serve it
  climate bench load --hosts 5000 --leases 50000 --data-dir /tmp/climate-5k
  climate serve --data-dir /tmp/climate-5k

  # The same into a PostgreSQL schema
  climate bench load --hosts 5000 --leases 50000 --database 'postgres://climate@db/climate?search_path=bench'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return bench.Load(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Hosts, "hosts", 5000, "number of hosts H")
	f.IntVar(&o.Leases, "leases", 50000, "number of existing leases R")
	f.StringVar(&o.DataDir, "data-dir", defaultDataDir(), "directory holding the SQLite database (climate.db)")
	addDatabaseFlag(f, &o.Database)
	addDataDirHelp(cmd)
	return cmd
}

func newBenchPlanCmd() *cobra.Command {
	o := &bench.PlanOptions{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Time the planner in process on the workload (no database, no HTTP)",
		Long: `For each scale H:R, build the blazar-90d book in memory and the planner's availability
index from it, then time one planning request for 10 hosts (min = max = 10) over each of the
first N request windows, for both request kinds of WORKLOAD.md:

  plain     no property filter
  filtered  hypervisor_properties [">=", "$memory_mb", "131072"] and
            resource_properties ["==", "$node_type", "compute_icelake"]

and one earliest-slot search per window (10 hosts for the window's duration, from its start,
within 90 days, 3 candidate slots), and the plain requests again on a full cloud (every host
booked over the windows moved a year on), each refused ("plain, full cloud"). Reported per
scale: median and p99 planning time, the mean
number of free matching hosts per window and the windows that cannot be satisfied (for
cross-checking with other implementations), the index build time (from the allocations
listed host by host, as a store lists them to a server), its heap per host
allocation and the growth of the process's peak RSS per 1,000,000 allocations (index and
searches), the first earliest-slot search apart (it builds the filter's free-time summary),
and upstream Blazar's median where WORKLOAD.md gives one. The book is not
changed by the requests: every window is planned against the same book (the full cloud's
holds are taken away again).

That is --types host; by default --types also times:

  instance    for each scale H:R, the instance workload (workload/instances.go): H hosts of
              32–128 vCPUs and 128–512 GB, R virtual:instance leases of 1–8 slots of 8 sizes
              over 1–3 hosts and a whole-host lease after every tenth, over 21 days (about
              35% of the vCPU-hours booked); then N requests of 1–8 slots over 1–72 h, planned
              by plan.PlaceSlots with their own affinities (mixed), none, affinity and
              anti-affinity: median, p99 and refusals per kind
  floatingip  for each ADDRESSES:ALLOCATIONS of --floatingips, addresses on 10 networks
              with existing allocations over 90 days, and N requests of 1–4 addresses (half
              requiring one) planned by the virtual:floatingip type: median, p99, refusals`,
		Example: `  climate bench plan
  climate bench plan --scales 100:1000,1000:10000,5000:50000,20000:200000,100000:1000000
  climate bench plan --scales 1000:10000 --windows 1000 -o json
  climate bench plan --types instance,floatingip --scales 5000:50000 --windows 1000
  climate bench plan --types floatingip --floatingips 10000:50000,100000:500000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Plan(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Scales, "scales", "100:1000,1000:10000,5000:50000", "comma-separated HOSTS:LEASES scales to run (host and instance cases)")
	f.IntVar(&o.Windows, "windows", 200, "number of request windows timed per scale and kind")
	f.StringVarP(&o.Output, "output", "o", "table", "output format: table or json")
	addFormatAlias(f, "output", "table", "json")
	f.StringVar(&o.Types, "types", "host,instance,floatingip", "comma-separated cases to time: host (blazar-90d), instance (instance slots), floatingip")
	f.StringVar(&o.FloatingIPs, "floatingips", "10000:50000", "comma-separated ADDRESSES:ALLOCATIONS for the floatingip case")
	return cmd
}

func newBenchAPICmd() *cobra.Command {
	o := &bench.APIOptions{Open: openDatabase}
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Time lease creation through the HTTP API of a server holding the workload",
		Long: `Load the blazar-90d book into a temporary data directory, start "climate serve" on it as a
subprocess (this same binary, on a free loopback port), then for each client count C run C
concurrent clients that post leases until --requests requests are done. Each request asks
for 10 hosts (min = max = 10) over the workload's next request window, so no two requests
of a run share a window. Every run posts the same requests on the same book: the leases a
run created are deleted after it (untimed), so that runs differ only in their clients and
servers, not in how full the book is (a refusal costs less than a creation). On
PostgreSQL the schema's tables are vacuumed and analyzed after the book is loaded and
after each run's deletions (untimed), as autovacuum would in time. Reported per
client count: median and p99 latency, creations per second, and how many requests got 201
(created) and 409 (not enough free hosts); the CPU time each request cost the servers,
PostgreSQL (when it runs on this host) and the benchmark, read from /proc, with the
requests/s this host's cores would answer at those times if they did nothing else (the
cores' ceiling: a run near it is bound by the CPU; shown when everything runs here), the servers'
read and write system calls and bytes written per request (/proc/PID/io: files and
sockets, figures the machine's noise does not move); on PostgreSQL the WAL written per
request (the whole cluster's, from pg_current_wal_insert_lsn: a figure
the machine's noise does not move, unlike the times) and the round trips per write; the
servers' writers' time per request and how many were busy on average (from their
climate_store_writer_busy_seconds_total: SQLite has one writer, and busy near 1 it is what
bounds the rate); the writes a transaction (group commit) over all the runs; then the
server's peak RSS.

--type chooses the reservation posted (the figures are the same):

  host        physical:host, 10 hosts, on the blazar-90d book (the default)
  instance    virtual:instance on the instance workload's book (workload/instances.go:
              H hosts of 32–128 vCPUs and 128–512 GB, R instance leases of 1–8 slots and a
              whole-host lease after every tenth, over 21 days); each request is the
              workload's next instance request: 1–8 slots of one of 8 sizes over 1–72 h,
              half without affinity, a quarter each with affinity and anti-affinity
              (--kind filtered adds resource_properties ["==", "$node_type", "compute_icelake"])
  floatingip  virtual:floatingip, 10 of --addresses addresses registered on network
              "net-0" beside the blazar-90d book, over the workload's request windows (with
              --url the server must hold them already)

The server and its data directory are removed at the end, also on Ctrl-C. With --url the
benchmark posts to an already running server instead and neither loads a book nor reads
its memory; it deletes the leases it created there too, after each run.

With --database postgres://…?search_path=SCHEMA the book is loaded into that PostgreSQL
schema (which must hold no hosts yet: use a fresh one, and drop it afterwards) and
--replicas N servers run on it, the clients spread round-robin over them; the peak RSS of
each replica is reported. --replicas 1,3 runs one server, then three, on the same
database, and prints how much faster the largest set is than the smallest at the largest
client count (and the largest client count than the smallest on the smallest set).

--database-delay 1ms simulates a database across a network (bench/netem.sh, run as root):
the servers run in a network namespace of their own, joined to this one by a veth pair,
and reach PostgreSQL (on 127.0.0.1 here) through a forwarder in this process listening
on the pair's address. Each direction of the link gets half the round trip, from tc netem
on the pair when the kernel has it (then the clients' HTTP crosses the delay too), else
from the forwarder itself (then only the database traffic is delayed); the report says
which. Listening off loopback, the servers run with --auth tokens (a random token the
clients send). The namespace is removed at the end, also on Ctrl-C.`,
		Example: `  climate bench api
  climate bench api --hosts 1000 --leases 10000 --requests 500 --clients 1,4,16 -o json
  climate bench api --type instance --clients 1,4,16
  climate bench api --type floatingip --addresses 1000 --hosts 1000 --leases 10000
  climate bench api --url http://127.0.0.1:1234 --requests 100 --clients 1
  climate bench api --database 'postgres://postgres@127.0.0.1/test?search_path=bench' --replicas 3 --hosts 1000 --leases 10000
  climate bench api --database 'postgres://postgres@127.0.0.1/test?search_path=bench' --database-delay 1ms --replicas 1,3 --clients 1,16 --hosts 1000 --leases 10000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return bench.API(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Hosts, "hosts", 5000, "number of hosts H of the book loaded")
	f.IntVar(&o.Leases, "leases", 50000, "number of existing leases R of the book loaded")
	f.IntVar(&o.Requests, "requests", 200, "lease creations posted per client count")
	f.IntSliceVar(&o.Clients, "clients", []int{1, 4, 16}, "comma-separated numbers of concurrent clients, one run each")
	f.StringVar(&o.Kind, "kind", "plain", "request kind: plain (no filter) or filtered (the workload's property filters; host and instance)")
	f.StringVar(&o.Type, "type", "host", "reservation type posted: host (physical:host), instance (virtual:instance) or floatingip (virtual:floatingip)")
	f.IntVar(&o.Addresses, "addresses", 1000, "floating IPs registered on network net-0 for --type floatingip")
	f.StringVar(&o.URL, "url", "", "post to this running server (e.g. http://127.0.0.1:1234) instead of starting one")
	f.StringVar(&o.Token, "token", "", "X-Auth-Token to send (for a server run with --auth tokens)")
	f.StringVar(&o.Database, "database", "", "load the book into this PostgreSQL URL (postgres://…?search_path=SCHEMA, a schema without hosts) and serve it from there")
	f.BoolVar(&o.Limits, "limits", false, "give the posting project (admin, the noauth caller's) limits and a budget none of the requests reaches, so each creation pays for the fair-use checks")
	f.IntSliceVar(&o.Replicas, "replicas", []int{1}, "comma-separated numbers of server subprocesses (more than one needs --database), one set after the other, each timed with every client count; clients are spread round-robin")
	f.DurationVar(&o.DatabaseDelay, "database-delay", 0, "run the servers in a network namespace whose PostgreSQL connections cross a link with this round trip, e.g. 1ms (needs --database on loopback, root and ip(8))")
	f.StringVarP(&o.Output, "output", "o", "table", "output format: table or json")
	addFormatAlias(f, "output", "table", "json")
	return cmd
}

func newBenchSoakCmd() *cobra.Command {
	o := &bench.SoakOptions{}
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Hold thousands of idle and slow connections while a client keeps working",
		Long: `Start "climate serve --auth tokens" on SQLite as a subprocess (or use --url, on loopback),
then, while one authenticated client creates, reads and deletes leases in a loop, open
and hold attack connections from other loopback addresses (127.0.0.2, 127.0.0.3, …):

  idle              one request, then an idle keep-alive connection
  slow-header       headers sent one byte per --trickle, never finished
  slow-body         an authenticated POST whose body comes one byte per --trickle
  slow-body-noauth  the same without a token

Whenever the server closes an attack connection, it is opened again after about
--reconnect, so the pressure lasts for the whole hold. Reported: the working client's
p50/p99/max latency alone, under attack and after; the attack connections held, opened,
closed by the server and what it answered; the server's shedding log; the server's RSS and
open descriptors before, at the peak of and after the attack. Bounded: the whole run takes
--before + --duration + --after plus a few seconds, and only loopback is contacted.

The attack runs in a process of its own (this binary again), so that its goroutines do
not slow the working client's down in this process. It needs one descriptor per attack
connection: it raises its soft open-file limit to the hard one, and counts beyond the
hard limit are refused.`,
		Example: `  climate bench soak
  climate bench soak --idle 2000 --slow-header 0 --slow-body 0 --slow-body-noauth 0 --duration 10s
  climate bench soak --max-connections 10000 -o json
  climate bench soak --url http://127.0.0.1:1234 --token "$MEMBER_TOKEN"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return bench.Soak(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Idle, "idle", 5000, "idle keep-alive connections")
	f.IntVar(&o.SlowHeader, "slow-header", 2500, "connections sending their headers one byte at a time")
	f.IntVar(&o.SlowBody, "slow-body", 1500, "authenticated connections sending their body one byte at a time")
	f.IntVar(&o.SlowBodyNoAuth, "slow-body-noauth", 1000, "connections without a token sending their body one byte at a time")
	f.IntVar(&o.Addresses, "addresses", 40, "loopback source addresses of the attack (127.0.0.2 on); 0: the system's choice, as the working client's")
	f.DurationVar(&o.Before, "before", 5*time.Second, "time the working client runs alone first")
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "time the attack connections are held")
	f.DurationVar(&o.After, "after", 5*time.Second, "time the working client runs after the attack")
	f.DurationVar(&o.Trickle, "trickle", time.Second, "time between two bytes of a slow connection")
	f.DurationVar(&o.Reconnect, "reconnect", time.Second, "mean time before an attack connection the server closed is opened again")
	f.DurationVar(&o.Pause, "pause", 5*time.Millisecond, "the working client's pause between two requests")
	f.IntVar(&o.MaxConnections, "max-connections", -1, "the server's --max-connections (-1: its default)")
	f.IntVar(&o.MaxPerClient, "max-connections-per-client", -1, "the server's --max-connections-per-client (-1: its default)")
	f.StringVar(&o.URL, "url", "", "soak this running server (loopback only) instead of starting one")
	f.StringVar(&o.Token, "token", "", "with --url: the working client's X-Auth-Token (a member's)")
	f.IntVar(&o.PID, "pid", 0, "with --url: the server's process id, to read its RSS and descriptors")
	f.StringVarP(&o.Output, "output", "o", "table", "output format: table or json")
	addFormatAlias(f, "output", "table", "json")
	return cmd
}

func newBenchSoakAttackCmd() *cobra.Command {
	o := &bench.SoakAttackOptions{}
	cmd := &cobra.Command{
		Use:    "soak-attack",
		Short:  "The attack of bench soak, in a process of its own",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.SoakAttack(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", "", "server address (loopback HOST:PORT)")
	f.IntVar(&o.Idle, "idle", 0, "idle connections")
	f.IntVar(&o.SlowHeader, "slow-header", 0, "slow-header connections")
	f.IntVar(&o.SlowBody, "slow-body", 0, "slow-body connections with a token")
	f.IntVar(&o.SlowBodyNoAuth, "slow-body-noauth", 0, "slow-body connections without a token")
	f.IntVar(&o.Addresses, "addresses", 0, "source addresses 127.0.0.2 on (0: the system's choice)")
	f.DurationVar(&o.Trickle, "trickle", time.Second, "time between two bytes of a slow connection")
	f.DurationVar(&o.Reconnect, "reconnect", time.Second, "mean time before reopening a connection the server closed")
	return cmd
}
