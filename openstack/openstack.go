package openstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"climate"
)

// Blazar's defaults ([nova] aggregate_freepool_name, blazar_owner; [physical:host]
// blazar_az_prefix; the 10 minutes it waits for servers to go).
const (
	DefaultFreepool      = "freepool"
	DefaultAZPrefix      = "blazar_"
	OwnerKey             = "blazar:owner"
	DefaultDeleteTimeout = 10 * time.Minute
	DefaultAttempts      = 5
	DefaultBackoff       = time.Second
	DefaultPollInterval  = 200 * time.Millisecond
	maxPollInterval      = 5 * time.Second // Blazar's fixed interval
)

// Config configures a Driver.
type Config struct {
	// Compute is Nova's API, authenticated as a user allowed to manage aggregates and
	// every project's servers (admin).
	Compute *gophercloud.ServiceClient
	// Placement is Placement's API (instance reservations' inventories); nil refuses
	// instance reservations.
	Placement *gophercloud.ServiceClient
	// Network is Neutron's API (floating IP reservations); nil refuses them.
	Network *gophercloud.ServiceClient
	// Store names the hosts of a lease (their Nova service name).
	Store climate.Store
	// Trusts gives tokens from a lease's trust (nil without Keystone trusts): a server
	// group is made with its owner's (see groupClient).
	Trusts climate.Trusts
	// Freepool is the aggregate of free hosts (DefaultFreepool).
	Freepool string
	// AZPrefix prefixes a reservation's availability zone (DefaultAZPrefix).
	AZPrefix string
	// DeleteTimeout bounds the wait for a reservation's servers to be deleted at its end.
	DeleteTimeout time.Duration
	// PollInterval is how long that wait first waits before asking Nova again; it
	// doubles up to 5 s, so a quick deletion is seen at once and a slow one costs little.
	PollInterval time.Duration
	// Attempts and Backoff retry a call that may succeed later: Backoff before the second
	// attempt, doubled before each later one (at most 30 s).
	Attempts int
	Backoff  time.Duration
	Logger   *slog.Logger
	// Changed, when set, is called after each call that changed OpenStack (what names
	// it: "create aggregate <id>", "add host <h> to aggregate <id>", …), so a crash test
	// can stop the process in the middle of an action.
	Changed func(ctx context.Context, what string)
}

// Driver carries out lease events in Nova (the engine's Actions).
type Driver struct{ cfg Config }

// New returns a driver with cfg's zero fields set to their defaults.
func New(cfg Config) *Driver {
	if cfg.Freepool == "" {
		cfg.Freepool = DefaultFreepool
	}
	if cfg.AZPrefix == "" {
		cfg.AZPrefix = DefaultAZPrefix
	}
	if cfg.DeleteTimeout <= 0 {
		cfg.DeleteTimeout = DefaultDeleteTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Attempts < 1 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Driver{cfg: cfg}
}

// OnStart moves each host reservation's hosts from the freepool into its aggregate, and
// makes each instance reservation's flavor, aggregate and inventories.
func (d *Driver) OnStart(ctx context.Context, l *climate.Lease) error {
	if err := d.each(ctx, l, d.start, d.startInstances); err != nil {
		return err
	}
	return d.eachFloatingIP(ctx, l, d.startFloatingIPs)
}

// OnEnd deletes the servers of each reservation, waits for them to go, and gives its
// hosts back.
func (d *Driver) OnEnd(ctx context.Context, l *climate.Lease) error {
	if err := d.each(ctx, l, func(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
		return d.release(ctx, r.ID, true)
	}, func(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
		return d.endInstances(ctx, r.ID)
	}); err != nil {
		return err
	}
	return d.eachFloatingIP(ctx, l, func(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
		return d.endFloatingIPs(ctx, r.ID)
	})
}

// eachFloatingIP runs act on every virtual:floatingip reservation of l.
func (d *Driver) eachFloatingIP(ctx context.Context, l *climate.Lease, act action) error {
	for i := range l.Reservations {
		if r := &l.Reservations[i]; r.ResourceType == FloatingIPType {
			if err := act(ctx, l, r); err != nil {
				return fmt.Errorf("reservation %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// BeforeEnd snapshots the servers of each host reservation whose before_end action is
// "snapshot", as Blazar does ("default" is Blazar's default, which does nothing).
func (d *Driver) BeforeEnd(ctx context.Context, l *climate.Lease) error {
	return d.each(ctx, l, func(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
		if r.BeforeEnd != "snapshot" {
			return nil
		}
		return d.snapshot(ctx, r.ID)
	}, nil)
}

// action is what an event does to one reservation.
type action func(context.Context, *climate.Lease, *climate.Reservation) error

// each runs onHost on every physical:host reservation of l and onInstance (unless nil) on
// every virtual:instance one; other types have no effect in OpenStack yet.
func (d *Driver) each(ctx context.Context, l *climate.Lease, onHost, onInstance action) error {
	for i := range l.Reservations {
		r := &l.Reservations[i]
		act := onHost
		switch r.ResourceType {
		case climate.ResourceTypeHost:
		case InstanceType, FlavorType:
			act = onInstance
		default:
			act = nil
		}
		if act == nil {
			continue
		}
		if err := act(ctx, l, r); err != nil {
			return fmt.Errorf("reservation %s: %w", r.ID, err)
		}
	}
	return nil
}

// host is one host of a reservation: Climate's id, Nova's service name (Blazar names
// hosts to aggregates by service_name) and hypervisor name (placement's provider name).
type host struct{ id, name, hypervisor string }

// hosts returns r's hosts, sorted by name.
func (d *Driver) hosts(ctx context.Context, r *climate.Reservation) ([]host, error) {
	ids := map[string]bool{}
	for _, a := range r.Allocations {
		ids[a.ResourceID] = true
	}
	var out []host
	err := d.cfg.Store.View(ctx, func(tx climate.Tx) error {
		out = out[:0]
		for id := range ids {
			h, err := tx.GetHost(ctx, id)
			if err != nil {
				return fmt.Errorf("host %s: %w", id, err)
			}
			name := h.ServiceName
			if name == "" {
				name = h.HypervisorHostname
			}
			out = append(out, host{id: id, name: name, hypervisor: h.HypervisorHostname})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading its hosts: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// start makes r's aggregate and moves hosts into it; on failure it gives back what it
// moved, as Blazar does.
func (d *Driver) start(ctx context.Context, l *climate.Lease, r *climate.Reservation) error {
	hosts, err := d.hosts(ctx, r)
	if err != nil {
		return err
	}
	agg, err := d.ensureAggregate(ctx, r.ID, l.ProjectID)
	if err != nil {
		return err
	}
	if err := d.moveIn(ctx, agg, hosts); err != nil {
		if rerr := d.release(ctx, r.ID, false); rerr != nil {
			d.cfg.Logger.Error("openstack: giving back the hosts of a failed start failed", "reservation", r.ID, "err", rerr)
		}
		return err
	}
	return nil
}

// ensureAggregate returns the host reservation's aggregate, made (with Blazar's name,
// availability zone and owner) unless it exists.
func (d *Driver) ensureAggregate(ctx context.Context, rid, project string) (*aggregates.Aggregate, error) {
	return d.ensureAggregateWith(ctx, rid, d.cfg.AZPrefix+rid, map[string]string{OwnerKey: project})
}

// moveIn adds each host to agg and then takes it out of where it was: the freepool or, for
// a host taken back from a preemptible lease, that lease's aggregate. A host in neither is
// refused (Blazar's HostNotInFreePool). Servers on a host not yet in agg are deleted first
// (Blazar terminates the preemptible instances of the freepool; a preempted lease's
// servers go too) and waited for, so none is left when the new owner can boot there.
// Aggregates that are not Blazar's (no blazar:owner) are left alone.
func (d *Driver) moveIn(ctx context.Context, agg *aggregates.Aggregate, hosts []host) error {
	for _, h := range hosts {
		all, err := d.aggregates(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(all, func(a aggregates.Aggregate) bool { return a.Name == d.cfg.Freepool }) {
			return d.noFreepool()
		}
		var from []*aggregates.Aggregate // where h is to leave
		for i := range all {
			a := &all[i]
			if a.ID == agg.ID || !slices.Contains(a.Hosts, h.name) {
				continue
			}
			switch {
			case a.Name == d.cfg.Freepool:
				from = append(from, a)
			case a.Metadata[OwnerKey] != "":
				held, err := d.holds(ctx, a.Name, h.id)
				if err != nil {
					return err
				}
				if held {
					return fmt.Errorf("host %s is in the aggregate of reservation %s, which holds it", h.name, a.Name)
				}
				from = append(from, a) // taken back from a preemptible lease
			}
		}
		if !slices.Contains(agg.Hosts, h.name) {
			if len(from) == 0 {
				return fmt.Errorf("host %s is not in the freepool aggregate %q (add it there when registering it, as Blazar does)", h.name, d.cfg.Freepool)
			}
			if err := d.clearHosts(ctx, []string{h.name}); err != nil {
				return err
			}
			if err := d.hostAction(ctx, agg, h.name, true); err != nil {
				return err
			}
		}
		for _, a := range from {
			if err := d.hostAction(ctx, a, h.name, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// holds says whether reservation rid holds host id now (by Climate's allocations).
func (d *Driver) holds(ctx context.Context, rid, id string) (bool, error) {
	now := time.Now()
	var held bool
	err := d.cfg.Store.View(ctx, func(tx climate.Tx) error {
		as, err := tx.ListAllocations(ctx, climate.AllocationFilter{ResourceIDs: []string{id}, ReservationID: rid, From: now, To: now.Add(time.Microsecond)})
		held = len(as) > 0
		return err
	})
	return held, err
}

// release gives the hosts of reservation rid's aggregate back to the freepool and
// deletes the aggregate; with deleteServers, it deletes their servers first and waits
// for them to go (Blazar's on_end). A missing aggregate means it is done already.
func (d *Driver) release(ctx context.Context, rid string, deleteServers bool) error {
	all, err := d.aggregates(ctx)
	if err != nil {
		return err
	}
	var agg *aggregates.Aggregate
	for i := range all {
		if all[i].Name == rid {
			agg = &all[i]
		}
	}
	if agg == nil {
		return nil
	}
	// A host also in another reservation's aggregate was handed over to it (a start that
	// took it back from this preemptible lease, interrupted before it left here): its
	// servers and place are the new holder's; it only leaves this aggregate.
	var mine, handed []string
	for _, h := range agg.Hosts {
		if slices.ContainsFunc(all, func(a aggregates.Aggregate) bool {
			return a.ID != agg.ID && a.Metadata[OwnerKey] != "" && slices.Contains(a.Hosts, h)
		}) {
			handed = append(handed, h)
		} else {
			mine = append(mine, h)
		}
	}
	if deleteServers && len(mine) > 0 {
		if err := d.clearHosts(ctx, mine); err != nil {
			return err
		}
	}
	if len(mine) > 0 {
		free, err := d.freepool(ctx)
		if err != nil {
			return err
		}
		for _, h := range mine {
			if !slices.Contains(free.Hosts, h) {
				if err := d.hostAction(ctx, free, h, true); err != nil {
					return err
				}
			}
		}
	}
	for _, h := range append(mine, handed...) {
		if err := d.hostAction(ctx, agg, h, false); err != nil {
			return err
		}
	}
	return d.retry(ctx, "delete aggregate "+rid, func(ctx context.Context) error {
		err := aggregates.Delete(ctx, d.cfg.Compute, agg.ID).ExtractErr()
		if gophercloud.ResponseCodeIs(err, 404) {
			return nil
		}
		return err
	})
}

// clearHosts deletes every server on hosts (all projects) and waits until none is left,
// for at most DeleteTimeout.
func (d *Driver) clearHosts(ctx context.Context, hosts []string) error {
	return d.waitGone(ctx, "on hosts "+strings.Join(hosts, ", "), func(ctx context.Context) ([]servers.Server, error) {
		return d.servers(ctx, hosts)
	})
}

// waitGone deletes the servers list returns and waits until it returns none, for at most
// DeleteTimeout; each server is asked to go once.
func (d *Driver) waitGone(ctx context.Context, what string, list func(context.Context) ([]servers.Server, error)) error {
	deadline := time.Now().Add(d.cfg.DeleteTimeout)
	wait := d.cfg.PollInterval
	deleted := map[string]bool{}
	for {
		left, err := list(ctx)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		var fresh []servers.Server
		for _, s := range left {
			if !deleted[s.ID] {
				fresh = append(fresh, s)
				deleted[s.ID] = true
			}
		}
		if err := d.deleteServers(ctx, fresh); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servers %s %s were not deleted within %s", serverIDs(left), what, d.cfg.DeleteTimeout)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, maxPollInterval)
	}
}

// servers lists the servers on hosts, of every project.
func (d *Driver) servers(ctx context.Context, hosts []string) ([]servers.Server, error) {
	var out []servers.Server
	for _, h := range hosts {
		err := d.retry(ctx, "list the servers on host "+h, func(ctx context.Context) error {
			pages, err := servers.List(d.cfg.Compute, servers.ListOpts{Host: h, AllTenants: true}).AllPages(ctx)
			if err != nil {
				return err
			}
			list, err := servers.ExtractServers(pages)
			out = append(out, list...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *Driver) deleteServers(ctx context.Context, list []servers.Server) error {
	for _, s := range list {
		err := d.retry(ctx, "delete server "+s.ID, func(ctx context.Context) error {
			err := servers.Delete(ctx, d.cfg.Compute, s.ID).ExtractErr()
			if gophercloud.ResponseCodeIs(err, 404) {
				return nil // gone meanwhile
			}
			return err
		})
		if err != nil {
			return err
		}
		d.cfg.Logger.Info("openstack: deleted server", "server", s.ID, "host", s.Host, "project", s.TenantID)
	}
	return nil
}

// snapshot asks Nova for an image of each server on rid's hosts (Blazar's names).
func (d *Driver) snapshot(ctx context.Context, rid string) error {
	agg, err := d.findAggregate(ctx, rid)
	if err != nil || agg == nil {
		return err
	}
	list, err := d.servers(ctx, agg.Hosts)
	if err != nil {
		return err
	}
	for _, s := range list {
		err := d.retry(ctx, "snapshot server "+s.ID, func(ctx context.Context) error {
			_, err := servers.CreateImage(ctx, d.cfg.Compute, s.ID, servers.CreateImageOpts{Name: "reserved_" + s.Name}).ExtractImageID()
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// hostAction adds host to agg (add) or removes it, keeping agg.Hosts current. Nova's
// 409 on adding a member, or 404 on removing a non-member, means it is done already.
func (d *Driver) hostAction(ctx context.Context, agg *aggregates.Aggregate, host string, add bool) error {
	what := fmt.Sprintf("remove host %s from aggregate %s", host, agg.Name)
	if add {
		what = fmt.Sprintf("add host %s to aggregate %s", host, agg.Name)
	}
	err := d.retry(ctx, what, func(ctx context.Context) error {
		var a *aggregates.Aggregate
		var err error
		if add {
			a, err = aggregates.AddHost(ctx, d.cfg.Compute, agg.ID, aggregates.AddHostOpts{Host: host}).Extract()
		} else {
			a, err = aggregates.RemoveHost(ctx, d.cfg.Compute, agg.ID, aggregates.RemoveHostOpts{Host: host}).Extract()
		}
		if err != nil {
			// Re-read rather than trust the status code: 409 also means a zone conflict.
			cur, ferr := d.findAggregate(ctx, agg.Name)
			if ferr != nil || cur == nil || slices.Contains(cur.Hosts, host) != add {
				return err
			}
			a = cur
		}
		*agg = *a
		return nil
	})
	if err == nil {
		d.changed(ctx, what)
	}
	return err
}

// freepool returns the freepool aggregate, which the operator makes (as for Blazar).
func (d *Driver) freepool(ctx context.Context) (*aggregates.Aggregate, error) {
	free, err := d.findAggregate(ctx, d.cfg.Freepool)
	if err == nil && free == nil {
		err = d.noFreepool()
	}
	return free, err
}

func (d *Driver) noFreepool() error {
	return fmt.Errorf("no freepool aggregate %q in Nova (the operator creates it, as for Blazar)", d.cfg.Freepool)
}

// findAggregate returns the aggregate named name, or nil. Nova cannot look aggregates up
// by name, so this lists them (as Blazar does).
func (d *Driver) findAggregate(ctx context.Context, name string) (*aggregates.Aggregate, error) {
	all, err := d.aggregates(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == name {
			return &all[i], nil
		}
	}
	return nil, nil
}

// aggregates lists Nova's aggregates.
func (d *Driver) aggregates(ctx context.Context) ([]aggregates.Aggregate, error) {
	var all []aggregates.Aggregate
	err := d.retry(ctx, "list aggregates", func(ctx context.Context) error {
		pages, err := aggregates.List(d.cfg.Compute).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err = aggregates.ExtractAggregates(pages)
		return err
	})
	return all, err
}

// changed tells cfg.Changed that what was done.
func (d *Driver) changed(ctx context.Context, what string) {
	if d.cfg.Changed != nil {
		d.cfg.Changed(ctx, what)
	}
}

// retry runs call until it succeeds, fails for good, or has had cfg.Attempts attempts;
// its error names what was being done and carries Nova's message.
func (d *Driver) retry(ctx context.Context, what string, call func(context.Context) error) error {
	wait := d.cfg.Backoff
	for attempt := 1; ; attempt++ {
		err := call(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !retryable(err) || attempt >= d.cfg.Attempts {
			return fmt.Errorf("%s: %s", what, Message(err))
		}
		d.cfg.Logger.Warn("openstack: call failed, retrying", "call", what, "attempt", attempt, "err", Message(err), "in", wait)
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// retryable says whether a failed call may succeed later: a transport error, or Nova
// overloaded or failing (5xx, 429); not a refusal.
func retryable(err error) bool {
	if errors.As(err, new(retryLater)) {
		return true
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		return code.Actual >= 500 || code.Actual == 429
	}
	return true
}

// retryLater marks a refusal that passes by itself (placement's 409 for an inventory
// still in use while Nova finishes deleting its servers).
type retryLater struct{ error }

func (r retryLater) Unwrap() error { return r.error }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func serverIDs(list []servers.Server) string {
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return strings.Join(ids, ", ")
}
