package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"climate"
	"climate/engine"
	"climate/manager"
	"climate/notify"
	"climate/openstack"
	"climate/postgres"
	"climate/resource"
	"climate/resource/builtin"
)

// driverOptions choose what lease events do besides hooks: nothing (standalone) or the
// OpenStack driver, which acts on Nova as Climate's service user (the --keystone-… flags).
type driverOptions struct {
	name          string
	region        string
	iface         string
	freepool      string
	azPrefix      string
	deleteTimeout time.Duration
	attempts      int
	backoff       time.Duration
	monitor       time.Duration // 0: no host monitor
	notifications string        // Nova's notification broker's URL ("": not listened to)
	notifyExch    string
	notifyTopics  []string
	freezeAt      string // crash tests: the step at which to freeze (hidden flags)
	freezeFile    string
}

func addDriverFlags(cmd *cobra.Command, o *driverOptions) {
	cmd.Long += `

With --driver openstack, lease events act on Nova as Blazar's do (physical:host
reservations): at a lease's start its hosts leave the freepool aggregate for an aggregate
named after the reservation (availability zone blazar_<id>, blazar:owner = the project),
where blazar-nova's BlazarFilter admits servers booted with --hint reservation=<id>; at
its end their servers are deleted (waited for up to --nova-server-delete-timeout) and the
hosts go back to the freepool. virtual:instance and flavor:instance reservations get
Blazar's private flavor <id>, aggregate and placement inventory; virtual:floatingip ones
Neutron floating IPs of the project. Hosts are registered from Nova's hypervisors
(and join the freepool); --nova-monitor-interval polls their state into maintenance
windows, and --nova-notifications (better: CLIMATE_NOVA_NOTIFICATIONS, as the URL holds a
password) listens to Nova's service.update notifications on RabbitMQ for the same.
Climate authenticates as its service user of the --keystone-… flags (admin on its
project), whatever --auth is.`
	f := cmd.Flags()
	f.StringVar(&o.name, "driver", "standalone", "what lease events do besides hooks: standalone (nothing) or openstack (Nova host aggregates, as Blazar)")
	f.StringVar(&o.region, "openstack-region", "", "the region of Nova's endpoint in Keystone's catalog (empty: any)")
	f.StringVar(&o.iface, "openstack-interface", "public", "which of Nova's endpoints to use: public, internal or admin")
	f.StringVar(&o.freepool, "nova-freepool", openstack.DefaultFreepool, "the aggregate of free reservable hosts (Blazar's aggregate_freepool_name)")
	f.StringVar(&o.azPrefix, "nova-az-prefix", openstack.DefaultAZPrefix, "prefix of a host reservation's availability zone (Blazar's blazar_az_prefix)")
	f.DurationVar(&o.deleteTimeout, "nova-server-delete-timeout", openstack.DefaultDeleteTimeout, "how long a lease's end waits for its servers to be deleted before failing")
	f.IntVar(&o.attempts, "openstack-attempts", openstack.DefaultAttempts, "attempts of an OpenStack call that fails in a way that may pass (5xx, 429, no answer)")
	f.DurationVar(&o.backoff, "openstack-retry-wait", openstack.DefaultBackoff, "wait before an OpenStack call's second attempt, doubled before each later one")
	f.StringVar(&o.freezeAt, "test-openstack-freeze-at", "", "crash tests only: the first OpenStack change whose name starts with this freezes the process that made it (see --test-openstack-freeze-file)")
	f.StringVar(&o.freezeFile, "test-openstack-freeze-file", "", "crash tests only: the file the frozen process creates (its pid and the change); only the first process to create it freezes")
	_ = f.MarkHidden("test-openstack-freeze-at")
	_ = f.MarkHidden("test-openstack-freeze-file")
	f.DurationVar(&o.monitor, "nova-monitor-interval", 0, "with --driver openstack, how often to poll Nova's hypervisors (Blazar's polling monitor, e.g. 60s): one down or disabled puts its host in maintenance until further notice (healing its reservations) until it is up again; 0 = no monitor")
	f.StringVar(&o.notifications, "nova-notifications", "", "with --driver openstack, the RabbitMQ broker Nova sends its versioned notifications to, amqp://USER:PASSWORD@HOST:5672/VHOST (Blazar's notification monitor: a nova-compute service disabled or forced down puts its host in maintenance, enabled again takes it out; prefer CLIMATE_NOVA_NOTIFICATIONS: a flag's value shows in ps)")
	f.StringVar(&o.notifyExch, "nova-notifications-exchange", openstack.DefaultNovaExchange, "Nova's control_exchange, which its notifications go to")
	f.StringSliceVar(&o.notifyTopics, "nova-notifications-topics", []string{openstack.DefaultNovaTopic}, "Nova's [notifications] versioned_notifications_topics (comma-separated); Climate's own queue is bound with TOPIC.info for each")
}

// listenerConfig is the notification listener's configuration of the flags.
func (o *driverOptions) listenerConfig() openstack.ListenerConfig {
	return openstack.ListenerConfig{URL: o.notifications, Exchange: o.notifyExch, Topics: o.notifyTopics}
}

// runMonitor starts the host monitor where the engine runs (on PostgreSQL, in the one
// replica leading "openstack-monitor"): the poll, Nova's notifications or both, one
// Monitor (one decision) behind them; wg tracks them until ctx is done.
func runMonitor(ctx context.Context, wg *sync.WaitGroup, o *driverOptions, drv *openstack.Driver, mgr *manager.Manager, pg *postgres.Store, log *slog.Logger) {
	if drv == nil || (o.monitor <= 0 && o.notifications == "") {
		return
	}
	m := &openstack.Monitor{Driver: drv, Hosts: mgr, Maintenance: mgr}
	// The lead is renewed by each round and by the listener every DefaultLeadEvery: it
	// lasts three of the shorter.
	renew := o.monitor
	if o.notifications != "" && (renew <= 0 || renew > openstack.DefaultLeadEvery) {
		renew = openstack.DefaultLeadEvery
	}
	holder := climate.NewID()
	if pg != nil {
		m.Leader = func(ctx context.Context) (bool, error) {
			return pg.TryLead(ctx, "openstack-monitor", holder, 3*renew)
		}
	}
	if o.monitor > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); m.Run(ctx, o.monitor) }()
	}
	if o.notifications != "" {
		l, err := openstack.NewListener(m, o.listenerConfig())
		if err != nil { // checked by openstackDriver already
			log.Error("not listening to Nova's notifications", "err", err)
			return
		}
		log.Info("host monitor: listening to Nova's notifications", "from", l.String(), "polling", o.monitor > 0)
		wg.Add(1)
		go func() { defer wg.Done(); l.Run(ctx) }()
	}
}

// openstackDriver returns the driver --driver names, connected (nil for standalone).
func openstackDriver(ctx context.Context, o *serveOptions, st climate.Store, trusts climate.Trusts, log *slog.Logger) (*openstack.Driver, error) {
	d := &o.driver
	switch d.name {
	case "", "standalone":
		if d.notifications != "" {
			return nil, errors.New("--nova-notifications needs --driver openstack")
		}
		return nil, nil
	case "openstack":
	default:
		return nil, fmt.Errorf("--driver %q: want standalone or openstack", d.name)
	}
	k := &o.keystone
	switch {
	case k.url == "":
		return nil, errors.New("--driver openstack needs --keystone-url (Keystone's identity URL) and Climate's service user")
	case k.appCredID == "" && (k.username == "" || k.project == "" || k.password == ""):
		return nil, errors.New("--driver openstack needs Climate's service user: --keystone-username, --keystone-project and CLIMATE_KEYSTONE_PASSWORD, or --keystone-application-credential-id and CLIMATE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET")
	case k.appCredID != "" && k.appCredSecret == "":
		return nil, errors.New("--keystone-application-credential-id needs its secret: set CLIMATE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET")
	case d.attempts < 1 || d.backoff < 0 || d.deleteTimeout <= 0:
		return nil, errors.New("--openstack-attempts, --openstack-retry-wait, --nova-server-delete-timeout: want at least 1 attempt, a wait of 0 or more and a positive timeout")
	}
	if d.notifications != "" {
		if _, err := openstack.NewListener(nil, d.listenerConfig()); err != nil {
			return nil, fmt.Errorf("--nova-notifications: %w", err)
		}
	}
	auth := openstack.Auth{URL: k.url, Username: k.username, Password: k.password, Project: k.project,
		UserDomain: k.userDomain, ProjectDomain: k.projectDomain, CAFile: k.caFile, Timeout: k.timeout,
		ApplicationCredentialID: k.appCredID, ApplicationCredentialSecret: k.appCredSecret,
		Region: d.region, Interface: d.iface}
	if k.appCredID != "" {
		auth.Username, auth.Password, auth.Project = "", "", ""
	}
	clients, err := connectNova(ctx, auth, k.startupWait, log)
	if err != nil {
		return nil, fmt.Errorf("--driver openstack: %w", err)
	}
	placement := "none in the catalog: instance reservations will fail"
	if clients.Placement != nil {
		placement = clients.Placement.Endpoint
	}
	log.Info("OpenStack driver: acting on Nova", "nova", clients.Compute.Endpoint, "placement", placement, "freepool", d.freepool)
	return openstack.New(openstack.Config{Compute: clients.Compute, Placement: clients.Placement, Network: clients.Network, Store: st, Trusts: trusts, Freepool: d.freepool, AZPrefix: d.azPrefix,
		DeleteTimeout: d.deleteTimeout, Attempts: d.attempts, Backoff: d.backoff, Logger: log, Changed: freezer(d.freezeAt, d.freezeFile, log)}), nil
}

// freezer returns the driver's Changed hook for crash tests (nil without the hidden
// flags): the first change named at… stops the process that made it, for good, once it
// has created file with its pid (so a test knows whom to SIGKILL in the middle of an
// action); a process that finds file made already goes on, so the one taking over
// completes the action.
func freezer(at, file string, log *slog.Logger) func(context.Context, string) {
	if at == "" || file == "" {
		return nil
	}
	return func(ctx context.Context, what string) {
		if !strings.HasPrefix(what, at) {
			return
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return // another process froze already, or the file cannot be made
		}
		_, err = fmt.Fprintf(f, "%d %s\n", os.Getpid(), what)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		log.Warn("frozen for a crash test after an OpenStack change", "change", what, "err", err)
		<-ctx.Done()
	}
}

// withDriver returns the engine's actions with drv's before inner's (hooks; nil for
// none), and drv's notification destination for lease deletions, updates and healings (nil for none).
func withDriver(drv *openstack.Driver, inner engine.Actions) (engine.Actions, notify.Destination) {
	switch {
	case drv == nil:
		return inner, nil
	case inner == nil:
		return drv, openstack.Changes{Driver: drv}
	}
	return chain{drv, inner}, openstack.Changes{Driver: drv}
}

// hostService is the API's host service: with the driver, hosts come from Nova and the
// freepool follows them.
func hostService(mgr climate.HostService, drv *openstack.Driver, pol climate.Policy) climate.HostService {
	if drv == nil {
		return mgr
	}
	return openstack.Hosts{HostService: mgr, Driver: drv, Policy: pol}
}

// leaseService is the API's lease service: with the driver, a creation makes in Nova what
// Blazar's plugins make at creation before it answers, so the answer shows Nova's
// server_group_id (Blazar's tempest tests boot into it at once).
func leaseService(mgr *manager.Manager, drv *openstack.Driver, log *slog.Logger) climate.LeaseService {
	if drv == nil {
		return mgr
	}
	return reservingLeases{mgr, drv, log}
}

// reservingLeases is the manager's lease service whose creation runs the driver's Reserve.
// The lease.create notification runs it again (at least once, idempotent), and so does
// the start: a failure here is only logged and the lease is answered as the manager made it.
type reservingLeases struct {
	*manager.Manager
	drv *openstack.Driver
	log *slog.Logger
}

func (l reservingLeases) CreateLease(ctx context.Context, who climate.Identity, req climate.LeaseRequest) (*climate.Lease, error) {
	lease, err := l.Manager.CreateLease(ctx, who, req)
	if err != nil || lease.Status != climate.LeasePending {
		return lease, err
	}
	if err := l.drv.Reserve(ctx, lease); err != nil {
		l.log.Warn("openstack: making a new lease's reservations in Nova failed; its start will try again", "lease", lease.ID, "err", err)
		return lease, nil
	}
	if made, err := l.Manager.GetLease(ctx, who, lease.ID); err == nil {
		return made, nil // with Nova's server group ids
	}
	return lease, nil
}

// resourceTypes are the manager's resource types (nil: the built-in ones, flavor:instance
// reserving flavors of Climate's registry); with the driver, a flavor:instance flavor not
// in the registry is Nova's, as Blazar reads it from Nova.
func resourceTypes(st climate.Store, drv *openstack.Driver) resource.Types {
	if drv == nil {
		return nil
	}
	return builtin.Types(func(ctx context.Context, id string) (*climate.Flavor, error) {
		var f *climate.Flavor
		err := st.View(ctx, func(tx climate.Tx) error {
			var err error
			f, err = tx.GetFlavor(ctx, id)
			return err
		})
		if climate.ErrorCode(err) == climate.CodeNotFound {
			return drv.Flavor(ctx, id)
		}
		return f, err
	})
}

// floatingIPService is the API's floating IP service: with the driver, addresses are
// checked against Neutron, as Blazar checks them.
func floatingIPService(mgr climate.FloatingIPService, drv *openstack.Driver, pol climate.Policy) climate.FloatingIPService {
	if drv == nil {
		return mgr
	}
	return openstack.FloatingIPs{FloatingIPService: mgr, Driver: drv, Policy: pol}
}

// connectNova connects, waiting up to wait for a Keystone or Nova that is not up yet.
func connectNova(ctx context.Context, a openstack.Auth, wait time.Duration, log *slog.Logger) (*openstack.Clients, error) {
	deadline := time.Now().Add(wait)
	backoff := time.Second
	for {
		c, err := openstack.Connect(ctx, a)
		if err == nil || time.Now().Add(backoff).After(deadline) {
			return c, err
		}
		log.Warn("waiting for OpenStack", "problem", err.Error(), "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// chain runs a's action, then b's: the driver's, then the hooks'.
type chain struct{ a, b engine.Actions }

func (c chain) OnStart(ctx context.Context, l *climate.Lease) error {
	if err := c.a.OnStart(ctx, l); err != nil {
		return err
	}
	return c.b.OnStart(ctx, l)
}

// OnEnd runs both even if the first fails: an ending lease releases all it holds.
func (c chain) OnEnd(ctx context.Context, l *climate.Lease) error {
	return errors.Join(c.a.OnEnd(ctx, l), c.b.OnEnd(ctx, l))
}

func (c chain) BeforeEnd(ctx context.Context, l *climate.Lease) error {
	return errors.Join(c.a.BeforeEnd(ctx, l), c.b.BeforeEnd(ctx, l))
}
