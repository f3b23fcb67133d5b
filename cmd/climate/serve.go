package main

import (
	"climate/buildinfo"
	"climate/enforce"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"climate"
	"climate/clock"
	"climate/engine"
	climatehttp "climate/http"
	"climate/keystone"
	"climate/manager"
	"climate/metrics"
	"climate/notify"
	"climate/notify/stream"
	"climate/notify/webhook"
	"climate/postgres"
	"climate/sqlite"
	"climate/ui"
)

// serveOptions are climate serve's settings; each is a flag and a CLIMATE_… variable.
// defaultPreemptionNotice is --preemption-notice's default: time to checkpoint and drain.
const defaultPreemptionNotice = 10 * time.Minute

type serveOptions struct {
	listen     string
	dataDir    string
	database   string
	auth       string
	tokensFile string
	// readableTokens accepts a tokens file that others than its owner may read.
	readableTokens bool
	// trustedOrigins are web origins allowed to send state-changing requests.
	trustedOrigins []string
	role           string
	beforeEnd      time.Duration
	beforeStart    time.Duration
	cleaning       time.Duration // a host's gap after each allocation (Blazar's cleaning_time)
	preemptNotice  time.Duration // lease.preempted's lead before a host is taken back
	enforcement    manager.Enforcement
	external       enforce.External // the operator's service, when external.Base is set
	logLevel       string
	// claimTTL is how long an engine's claim on due events lasts, unless renewed, before
	// another replica may take them over (engine.Config.ClaimTTL); hidden, for tests.
	claimTTL time.Duration
	// notify configures notification destinations besides the log.
	notify notifyOptions
	// limits bound connections and clients; the zero value (options built in code, not
	// from flags) means climatehttp.DefaultLimits with maxConnections' default.
	limits climatehttp.Limits
	// logTo receives the log; nil means stderr (tests read it).
	logTo io.Writer
	// actions are the hooks run at lease events, and power management (hooks.go).
	actions actionOptions
	// hubMaxSleep replaces the event stream's periodic re-read (tests: 0 means the default).
	hubMaxSleep time.Duration
	// keystone configures --auth keystone (serve_keystone.go).
	keystone keystoneOptions
	// tlsCert and tlsKey, when set, make the API speak HTTPS with that certificate chain
	// and key (PEM files).
	tlsCert, tlsKey string
	// policyFile overrides the default policy rules (oslo.policy's format).
	policyFile string
	// driver chooses standalone or the OpenStack driver (serve_openstack.go).
	driver driverOptions
}

func newServeCmd() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the REST API and the event engine",
		Long: `Run Climate: the Blazar-compatible REST API and the event engine that starts and ends
leases on time, on an embedded SQLite database in the data directory, or on PostgreSQL
(--database postgres://…) so that several replicas can share one database. The URL's
pool_max_conns sets the connection pool (default 8, or 20 when the database is 5 ms or more
away): four connections are kept for reads and each of the others has a writer that
commits the writes waiting for it together (group commit); replicas with a database
nearer than 5 ms divide the writers between them, so that fewer, larger batches commit.

Without authentication (--auth noauth, the default) every caller is an admin unless it
sends X-User-Id / X-Project-Id / X-Roles headers, so noauth only listens on loopback
addresses. With --auth tokens, callers send X-Auth-Token and the tokens file maps each
token to a user, a project and roles.

Connections are bounded so that slow or idle clients cannot exhaust the server: time to
send headers (--read-header-timeout) and a body (--body-timeout), to take a response
(--write-timeout) and to idle between requests (--idle-timeout); and connections open at
once, in all (--max-connections, below the open-file limit) and per client address
(--max-connections-per-client; an IPv6 client is its /64). At a bound, the connection that
has waited longest without a request in progress (idle, or headers unfinished) is closed to
make room; when all are busy the new connection gets 503 and is closed. Shedding is
logged at most every 10 s, with counts.` + keystoneHelp,
		Example: `  # Run on 127.0.0.1:1234 with data in the default directory
  climate serve

  # Behind a reverse proxy on the same machine (every connection comes from 127.0.0.1)
  climate serve --max-connections-per-client 0

  # Serve a team: tokens, all interfaces, data under /var/lib/climate
  climate serve --auth tokens --tokens-file /etc/climate/tokens --listen 0.0.0.0:1234 --data-dir /var/lib/climate

  # One of several replicas on PostgreSQL, in schema "climate" of database "climate"
  climate serve --database 'postgres://climate@db.example.org/climate?search_path=climate'

  # tokens file: one "TOKEN USER_ID PROJECT_ID ROLES" per line
  #   s3cret-admin  alice  ops     admin
  #   s3cret-bob    bob    physics member` + keystoneExample,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:1234", "address to listen on (host:port; Blazar's port is 1234)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this certificate chain (PEM; with --tls-key), for a deployment behind no TLS proxy")
	f.StringVar(&o.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "directory holding the SQLite database (climate.db)")
	addDatabaseFlag(f, &o.database)
	f.StringVar(&o.auth, "auth", "noauth", "authentication: noauth (identity headers, loopback only), tokens (--tokens-file) or keystone (OpenStack Keystone tokens, --keystone-…)")
	f.StringVar(&o.tokensFile, "tokens-file", "", "file mapping tokens to user, project and roles (with --auth tokens); must be readable by its owner only (chmod 600)")
	f.BoolVar(&o.readableTokens, "allow-readable-tokens-file", false, "accept a tokens file that group or others may read")
	f.StringSliceVar(&o.trustedOrigins, "trusted-origin", nil, "web origin (scheme://host[:port]) whose pages may send state-changing requests, e.g. a dashboard on another port; repeatable")
	f.StringVar(&o.role, "role", "all", "what this process runs: all, api (REST API only) or engine (events only)")
	f.DurationVar(&o.beforeEnd, "before-end", manager.DefaultBeforeEnd, "default time before a lease's end when before_end_lease fires (0 = no such event)")
	f.DurationVar(&o.beforeStart, "before-start", 0, "default time before a lease's start when the before_start_lease heads-up fires (0 = no such event; not created when the start is nearer)")
	f.DurationVar(&o.enforcement.MaxLeaseDuration, "max-lease-duration", 0, "longest lease a project may create or extend to (Blazar's max_lease_duration; 0 = no bound)")
	f.DurationVar(&o.enforcement.ExtensionWindow, "extension-window", 0, "a lease's end may move later only within this long before it (e.g. 48h; 0 = any time)")
	f.StringSliceVar(&o.enforcement.ExemptProjects, "enforcement-exempt-projects", nil, "project ids that --max-lease-duration and --extension-window do not bind (comma-separated)")
	f.StringVar(&o.external.Base, "external-filter-url", "", "the operator's service that allows or refuses each lease creation and update (Blazar's ExternalServiceFilter: POST URL/check-create and URL/check-update; 204 allows, 403 {\"message\"} refuses)")
	f.StringVar(&o.external.Token, "external-filter-token", "", "token sent to the external filter as X-Auth-Token (prefer CLIMATE_EXTERNAL_FILTER_TOKEN: flags show in ps)")
	f.DurationVar(&o.external.Timeout, "external-filter-timeout", 5*time.Second, "how long the external filter may take to answer")
	f.BoolVar(&o.external.FailOpen, "external-filter-fail-open", false, "allow what the external filter does not answer about in time (by default it is refused with a 503)")
	f.DurationVar(&o.preemptNotice, "preemption-notice", defaultPreemptionNotice, "how long before a host is taken back from a preemptible lease its lease.preempted notice is sent; a lease takes hosts back only for a start at least this (plus the cleaning time) away, and a preemptible lease holds each host at least this long")
	f.DurationVar(&o.cleaning, "cleaning-time", 0, "time a host is kept free after each of its allocations (host or instance leases) ends, for cleaning or set-up, before another may start (Blazar's cleaning_time; 0 = back to back allowed; floating IPs get none)")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&o.claimTTL, "claim-ttl", engine.DefaultClaimTTL, "how long a claim on due events lasts unless its engine renews it (every third of it) before another replica's engine takes them over")
	_ = f.MarkHidden("claim-ttl")
	f.StringVar(&o.policyFile, "policy-file", "", "policy file (oslo.policy's YAML or JSON) overriding the default access rules; see climate policy list")
	addLimitFlags(f, &o.limits)
	addKeystoneFlags(f, &o.keystone)
	addNotifyFlags(f, &o.notify)
	addActionFlags(cmd, &o.actions)
	addDriverFlags(cmd, &o.driver)
	addDataDirHelp(cmd)
	return cmd
}

// addDataDirHelp says where the default --data-dir comes from; the default itself, as
// found on this machine, is printed by the flag's help.
func addDataDirHelp(cmd *cobra.Command) {
	cmd.Flags().Lookup("data-dir").Usage += "; $XDG_DATA_HOME/climate unless given, when XDG_DATA_HOME is set"
}

// defaultDataDir follows the XDG base directory convention.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "climate")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "climate")
	}
	return "climate-data"
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if w == nil {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// addDatabaseFlag adds --database, shared by serve and migrate.
func addDatabaseFlag(f *pflag.FlagSet, database *string) {
	f.StringVar(database, "database", "", "PostgreSQL URL (postgres://USER:PASSWORD@HOST:PORT/DB?search_path=SCHEMA) for several replicas; empty: SQLite in --data-dir")
}

// openDatabase opens the store --database names: PostgreSQL for a postgres:// URL, else
// the SQLite database in dataDir. It also returns a description for messages, without
// any password.
func openDatabase(ctx context.Context, database, dataDir string) (climate.Store, string, error) {
	if database == "" {
		st, path, err := openStore(ctx, dataDir)
		if err != nil {
			return nil, "", err // not a nil *sqlite.Store in a non-nil interface
		}
		return st, path, nil
	}
	// The value is never echoed in errors: it may hold a password.
	u, err := url.Parse(database)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, "", errors.New("--database: want a postgres:// or postgresql:// URL, or nothing for SQLite in --data-dir")
	}
	desc := redactURL(u)
	st, err := postgres.Open(ctx, database)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", desc, err)
	}
	return st, desc, nil
}

// redactURL returns u as text with its passwords (in the user info, or parameters such as
// password and sslpassword) replaced.
func redactURL(u *url.URL) string {
	r := *u
	q := r.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
			r.RawQuery = q.Encode()
		}
	}
	return r.Redacted()
}

// openStore opens (creating) the SQLite database in dataDir.
func openStore(ctx context.Context, dataDir string) (*sqlite.Store, string, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dataDir, "climate.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", path, err)
	}
	return st, path, nil
}

// serverTLS loads the API's certificate and key, or returns nil for plain HTTP.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together: give both PEM files, or neither for plain HTTP")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// authenticator checks the auth settings against the listen address: a server without
// authentication must not be reachable from other machines.
func authenticator(o *serveOptions, ks *keystone.Client, log *slog.Logger) (climatehttp.Authenticator, error) {
	switch o.auth {
	case "noauth":
		host, _, err := net.SplitHostPort(o.listen)
		if err != nil {
			return nil, fmt.Errorf("--listen %q: %v", o.listen, err)
		}
		if !isLoopback(host) {
			return nil, fmt.Errorf("refusing to listen on %s without authentication: use a loopback address (127.0.0.1, ::1, localhost) or --auth tokens --tokens-file FILE", o.listen)
		}
		return climatehttp.NoAuth{}, nil
	case "tokens":
		if o.tokensFile == "" {
			return nil, errors.New("--auth tokens needs --tokens-file FILE (lines of \"TOKEN USER_ID PROJECT_ID ROLES\")")
		}
		if err := checkPrivate(o.tokensFile, o.readableTokens); err != nil {
			return nil, err
		}
		return climatehttp.LoadTokens(o.tokensFile)
	case "keystone":
		return keystoneAuth(ks, &o.keystone, log), nil
	default:
		return nil, fmt.Errorf("--auth %q: want noauth, tokens or keystone", o.auth)
	}
}

// checkPrivate refuses a secrets file that group or others may read, as ssh does with
// keys, unless allowed.
func checkPrivate(path string, allowed bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && !allowed {
		return fmt.Errorf("%s holds secrets but is %v (readable by others than its owner): run chmod 600 %s, or pass --allow-readable-tokens-file", path, perm, path)
	}
	return nil
}

// crossOrigin builds the check that refuses state-changing requests from web pages of
// other origins, trusting those given.
func crossOrigin(trusted []string) (*http.CrossOriginProtection, error) {
	c := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := c.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("--trusted-origin %q: %v", o, err)
		}
	}
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServe(ctx context.Context, o *serveOptions, stdout interface{ Write([]byte) (int, error) }) error {
	log, err := newLogger(o.logLevel, o.logTo)
	if err != nil {
		return err
	}
	runAPI, runEngine := o.role == "all" || o.role == "api", o.role == "all" || o.role == "engine"
	if !runAPI && !runEngine {
		return fmt.Errorf("--role %q: want all, api or engine", o.role)
	}
	if o.beforeEnd < 0 {
		return fmt.Errorf("--before-end %s: must not be negative", o.beforeEnd)
	}
	if o.beforeStart < 0 {
		return fmt.Errorf("--before-start %s: must not be negative", o.beforeStart)
	}
	if o.enforcement.MaxLeaseDuration < 0 || o.enforcement.ExtensionWindow < 0 {
		return fmt.Errorf("--max-lease-duration and --extension-window must not be negative")
	}
	if o.external.Base != "" {
		if u, err := url.Parse(o.external.Base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--external-filter-url %q: want http(s)://HOST[:PORT][/PATH]", o.external.Base)
		}
		if o.external.Timeout <= 0 {
			return fmt.Errorf("--external-filter-timeout %s: must be positive", o.external.Timeout)
		}
		o.enforcement.External = &o.external
	}
	if o.preemptNotice < 0 {
		return fmt.Errorf("--preemption-notice %s: must not be negative", o.preemptNotice)
	}
	if o.cleaning < 0 {
		return fmt.Errorf("--cleaning-time %s: must not be negative", o.cleaning)
	}
	if o.claimTTL < 0 || (o.claimTTL > 0 && o.claimTTL < time.Second) {
		return fmt.Errorf("--claim-ttl %s: want at least 1s (claims are renewed every third of it)", o.claimTTL)
	}
	pol, err := loadPolicy(o.policyFile, log)
	if err != nil {
		return err
	}
	var ks *keystone.Client // --auth keystone: tokens and trusts
	if o.auth == "keystone" {
		if ks, err = keystoneConnect(ctx, &o.keystone, log); err != nil {
			return err
		}
	}
	trusts := keystoneTrusts(ks, &o.keystone, log)
	var auth climatehttp.Authenticator
	var origins *http.CrossOriginProtection
	limits := o.limits
	if runAPI {
		if auth, err = authenticator(o, ks, log); err != nil {
			return err
		}
		if origins, err = crossOrigin(o.trustedOrigins); err != nil {
			return err
		}
		if limits == (climatehttp.Limits{}) {
			limits = climatehttp.DefaultLimits()
			limits.MaxConnections = defaultMaxConnections()
		}
		if err := checkLimits(limits, log); err != nil {
			return err
		}
	}
	st, path, err := openDatabase(ctx, o.database, o.dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 { // SQLite; Climate creates it 0600
		log.Warn("the database is readable by others than its owner: run chmod 600 on it and its -wal and -shm files", "path", path, "mode", fi.Mode().Perm())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	clk := clock.Real{}
	pg, onPostgres := st.(*postgres.Store)
	maxSleep := engineMaxSleep(o.role)
	if onPostgres {
		// Other replicas' commits wake the engine through WatchEvents; the bound is a
		// safety net for notifications lost while it reconnects.
		maxSleep = postgresMaxSleep
	}
	var eng *engine.Engine
	// Metrics and readiness: the readiness checks run when /readyz or /metrics is asked.
	checks := metrics.StoreChecks(st.(metrics.SchemaVersioner))
	if runEngine {
		checks = append(checks, metrics.Check{Name: "engine", Func: func(context.Context) error {
			if !eng.Running() {
				return errors.New("the event engine is not running")
			}
			return nil
		}})
	}
	ready := metrics.NewReadiness(checks...)
	mtr := metrics.New(&metrics.StoreCollector{Store: st, Clock: clk}, ready)
	drv, err := openstackDriver(ctx, o, st, trusts, log) // nil: standalone
	if err != nil {
		return err
	}
	sole := false
	acts := &actionSet{}
	var driverDest notify.Destination // the driver: lease deletions, updates and healings in OpenStack
	if runEngine {
		if !onPostgres {
			// One engine per SQLite database: holding the lock, it knows claims it finds are
			// a dead run's and takes them back at once.
			release, err := sqlite.LockEngine(path)
			switch {
			case errors.Is(err, errors.ErrUnsupported):
				log.Warn("no engine lock on this system: events a killed engine held wait for their claims to expire")
			case errors.Is(err, sqlite.ErrEngineLocked):
				return fmt.Errorf("%w: stop it, or run this process with --role api (several engines need PostgreSQL)", err)
			case err != nil:
				return err
			default:
				defer release()
				sole = true
			}
		}
		if acts, err = buildActions(&o.actions, st, clk, log, sole, pg, maxSleep); err != nil {
			return err
		}
		acts.engine, driverDest = withDriver(drv, acts.engine)
	}
	// The delivery worker runs where the engine runs (on SQLite, the one engine process).
	var deliverer *notify.Worker
	hooks := o.notify.webhookSender(clk)
	if runEngine {
		dests, closeDests, err := o.notify.destinations(log)
		if err != nil {
			return err
		}
		defer closeDests()         // deferred before the worker stops (wg.Wait), so runs after it
		if o.external.Base != "" { // the operator's service hears of each lease end
			dests = append(dests, enforce.OnEnd{External: &o.external})
		}
		if driverDest != nil {
			dests = append(dests, driverDest)
		}
		deliverer = newDeliverer(st, pg, clk, log, o.role, append([]notify.Destination{notify.Log{Logger: log}}, dests...), hooks, mtr.Delivered)
	}
	var hub *stream.Hub // GET /v1/events/stream's, where the API runs
	if runAPI {
		hub = newHub(st, onPostgres, o.hubMaxSleep, log, pol)
	}
	notified := func() {
		if deliverer != nil {
			deliverer.Wake()
		}
		if hub != nil {
			hub.Wake()
		}
	}
	var mgr *manager.Manager // the engine's observer wakes its retries (set below)
	if runEngine {
		actions := acts.engine
		if trusts != nil {
			actions = engine.WithTrusts(actions, trusts)
		}
		observe := func(r engine.Report) { logHandled(log)(r); mtr.EventHandled(r) }
		eng = engine.New(st, clk, engine.Config{Logger: log, MaxSleep: maxSleep, ClaimTTL: o.claimTTL, Sole: sole,
			PreemptionNotice: o.preemptNotice, Actions: actions, Observe: wakeRetriesAtEnds(acts.observe(observe), func() { mgr.WakeRetries() }),
			Claimed: mtr.Claimed, Notified: notified})
	}
	var projects manager.ProjectDirectory // Keystone's, so limits are set on projects that exist
	if ks != nil {
		projects = ks
	}
	mgr = manager.New(st, clk, manager.Config{
		Projects:         projects,
		BeforeEnd:        o.beforeEnd,
		BeforeStart:      o.beforeStart,
		Cleaning:         o.cleaning,
		PreemptionNotice: o.preemptNotice,
		Enforcement:      o.enforcement,
		EventsChanged: func(due time.Time) {
			if eng != nil {
				eng.WakeFor(due)
			}
			acts.wake()
		},
		Notified: notified,
		Policy:   pol,
		Trusts:   trusts,
		Log:      log,
		Observer: mtr,
		Types:    resourceTypes(st, drv),
	})

	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(1)
	go func() { defer wg.Done(); mgr.RunRetries(ctx) }()

	mgr.WakeRetries() // leases left waiting by an earlier run
	if runEngine {
		wg.Add(2)
		go func() { defer wg.Done(); errc <- eng.Run(ctx) }()
		go func() { defer wg.Done(); _ = deliverer.Run(ctx) }()
		acts.run(ctx, &wg)
		runMonitor(ctx, &wg, &o.driver, drv, mgr, pg, log)
		if onPostgres {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = pg.WatchEvents(ctx, func(c postgres.Change) {
					if !c.Outbox {
						eng.WakeFor(c.Due)
					}
					notified()
					acts.wake()
				}) // nil once ctx is done
			}()
		}
	}
	if onPostgres {
		if on, err := pg.Autovacuum(ctx); err == nil && !on {
			log.Warn("PostgreSQL's autovacuum is off: deleted leases and the allocation log's stamps leave dead rows, and the planner has no statistics, until a VACUUM (ANALYZE) of the schema's tables; schedule one")
		}
		wg.Add(2)
		go func() { defer wg.Done(); maintainPostgres(ctx, pg, log) }()
		go func() {
			defer wg.Done()
			pg.ShareWriters(ctx, replicaPeriod, func(writers, replicas int, roundTrip time.Duration) {
				log.Info("writers shared with the other replicas", "writers_at_once", writers, "replicas", replicas,
					"database_round_trip", roundTrip.Round(time.Microsecond).String())
			})
		}()
	}
	var srv *http.Server
	if runAPI {
		tlsConfig, err := serverTLS(o.tlsCert, o.tlsKey)
		if err != nil {
			return err
		}
		// The availability index is built before the server listens, so no request waits
		// for it (a failure is not fatal: the first request builds it then).
		if took, err := mgr.Warm(ctx); err != nil {
			log.Warn("building the availability index at start failed; the first request builds it", "err", err)
		} else {
			log.Info("availability index built", "took", took.Round(time.Millisecond))
		}
		wg.Add(1)
		go func() { defer wg.Done(); mgr.KeepFresh(ctx, keepIndexFresh) }()
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return err
		}
		runHub(ctx, &wg, hub, pg, runEngine && onPostgres)
		webhooks := &webhook.Service{Store: st, Clock: clk, Guard: webhook.Guard{AllowPrivate: o.notify.webhook.allowPrivate}, Sender: hooks, Notified: notified, Policy: pol}
		api := &climatehttp.Server{Leases: leaseService(mgr, drv, log), Hosts: hostService(mgr, drv, pol), Maintenances: mgr, Availability: mgr, Auth: auth, Logger: log, CrossOrigin: origins, Notifications: hub, Webhooks: webhooks,
			FloatingIPs: floatingIPService(mgr, drv, pol), Flavors: mgr, Audit: mgr, Usage: mgr, Observe: mtr.Request,
			UI: ui.Handler()}
		var limited net.Listener
		srv, limited = climatehttp.NewHTTPServer(metrics.Handler(mtr, ready, api.Handler()), ln, limits, log)
		log.Info("connection limits", "max_connections", limits.MaxConnections, "max_connections_per_client", limits.MaxConnectionsPerClient,
			"read_header_timeout", limits.ReadHeaderTimeout, "body_timeout", limits.BodyTimeout,
			"write_timeout", limits.WriteTimeout, "idle_timeout", limits.IdleTimeout)
		scheme := "http"
		if tlsConfig != nil {
			srv.TLSConfig, scheme = tlsConfig, "https"
		}
		fmt.Fprintf(stdout, "Climate %s listening on %s://%s (auth: %s, role: %s)\n", buildinfo.Version, scheme, ln.Addr(), o.auth, o.role)
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve := srv.Serve
			if tlsConfig != nil {
				serve = func(l net.Listener) error { return srv.ServeTLS(l, "", "") }
			}
			if err := serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	} else {
		fmt.Fprintf(stdout, "Climate %s event engine running (role: engine)\n", buildinfo.Version)
	}
	fmt.Fprintf(stdout, "Data: %s\n", path)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	fmt.Fprintln(stdout, "Shutting down…")
	cancel()
	if srv != nil {
		shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = srv.Shutdown(shutdownCtx)
	}
	wg.Wait()
	return err
}

// logHandled logs, at debug level, each event whose handler changed state, with the
// event's id: one line per event in the whole installation unless a handler ran twice
// (the replicas' fault test counts them).
func logHandled(log *slog.Logger) func(engine.Report) {
	return func(r engine.Report) {
		log.Debug("event handled", "event_id", r.Event.ID, "event", r.Event.Type, "lease", r.Event.LeaseID,
			"status", r.Status, "failed", r.Err != nil)
	}
}

// postgresMaxSleep bounds the engine's sleep on PostgreSQL, where WatchEvents wakes it.
const postgresMaxSleep = 30 * time.Second

// Maintenance on PostgreSQL: the allocation log keeps the newest revisions, as the SQLite
// store's trigger does; one replica at a time does it, whichever leads "maintenance".
const (
	allocationLogKept   = 10000
	maintenanceInterval = time.Minute
)

// keepIndexFresh is how long an API server's availability index goes unchecked while no
// request comes (manager.KeepFresh): under the second for which a plan trusts it, so an
// idle replica's next request plans at once on an index at most this far behind.
const keepIndexFresh = 500 * time.Millisecond

// replicaPeriod is how often a replica on PostgreSQL renews its row among the replicas,
// times a round trip to the database and divides the writers with the others while the
// database is near (postgres.Store.ShareWriters).
const replicaPeriod = 2 * time.Second

// maintainPostgres does a round of maintenance every maintenanceInterval while this
// replica leads, until ctx is done; then it resigns so another replica takes over at once.
func maintainPostgres(ctx context.Context, pg *postgres.Store, log *slog.Logger) {
	holder := climate.NewID()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = pg.Resign(rctx, "maintenance", holder)
	}()
	tick := time.NewTicker(maintenanceInterval)
	defer tick.Stop()
	for {
		if _, err := maintainOnce(ctx, pg, holder); err != nil && ctx.Err() == nil {
			log.Warn("maintenance failed; retrying later", "err", err, "in", maintenanceInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// maintainOnce prunes the allocation log and folds the projects' charge deltas if holder
// leads (taking the lead when free); it reports whether it did. The lead outlives a few
// missed rounds.
func maintainOnce(ctx context.Context, pg *postgres.Store, holder string) (bool, error) {
	lead, err := pg.TryLead(ctx, "maintenance", holder, 3*maintenanceInterval)
	if err != nil || !lead {
		return false, err
	}
	_, err = pg.PruneAllocationLog(ctx, allocationLogKept)
	if err == nil {
		_, err = pg.FoldProjectCharges(ctx)
	}
	return true, err
}

// engineMaxSleep bounds the engine's sleep when it runs apart from the API: another
// process's commits cannot wake it, so it re-reads the next event time at least this often.
func engineMaxSleep(role string) time.Duration {
	if role == "engine" {
		return time.Second
	}
	return 0
}

func newMigrateCmd() *cobra.Command {
	var dataDir, database string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema, then exit",
		Long:  "Apply every pending database migration. climate serve also does this on start; run it alone to upgrade ahead of a deploy.",
		Example: `  climate migrate --data-dir /var/lib/climate
  climate migrate --database 'postgres://climate@db.example.org/climate?search_path=climate'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, path, err := openDatabase(cmd.Context(), database, dataDir)
			if err != nil {
				return err
			}
			defer st.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "Database %s is up to date\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "directory holding the SQLite database (climate.db)")
	addDatabaseFlag(cmd.Flags(), &database)
	addDataDirHelp(cmd)
	return cmd
}

var _ climate.Store = (*sqlite.Store)(nil)

// wakeRetriesAtEnds extends an engine observer: a lease's end frees what it held, so the
// waiting leases are re-planned.
func wakeRetriesAtEnds(observe func(engine.Report), wake func()) func(engine.Report) {
	return func(rep engine.Report) {
		if observe != nil {
			observe(rep)
		}
		if rep.Event.Type == climate.EventEndLease {
			wake()
		}
	}
}
