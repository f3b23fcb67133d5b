package hooks

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"climate"
	"climate/resource/builtin"
)

// DefaultParallel is how many hosts of one lease run their hooks at once.
const DefaultParallel = 8

// Actions runs the configured hooks on every host of a lease when it starts, when it
// ends and before it ends (the engine's Actions). An event without a hook does nothing.
type Actions struct {
	Store  climate.Store // to name the hosts
	Runner *Runner
	// Hooks holds the hook of each event (start_lease, end_lease, before_end_lease);
	// an event without one runs none.
	Hooks map[climate.EventType]Hook
	// Parallel bounds how many hosts run at once (DefaultParallel).
	Parallel int
	// PrepareStart, when set, runs on each host before its start hook, and a failure
	// fails the host as the hook's would: power management powers the host on.
	PrepareStart func(ctx context.Context, l *climate.Lease, h *climate.Host) error
}

// OnStart runs the start hook on each host of l.
func (a *Actions) OnStart(ctx context.Context, l *climate.Lease) error {
	return a.run(ctx, l, climate.EventStartLease, a.PrepareStart)
}

// OnEnd runs the end hook on each host of l.
func (a *Actions) OnEnd(ctx context.Context, l *climate.Lease) error {
	return a.run(ctx, l, climate.EventEndLease, nil)
}

// BeforeEnd runs the before-end hook on each host of l.
func (a *Actions) BeforeEnd(ctx context.Context, l *climate.Lease) error {
	return a.run(ctx, l, climate.EventBeforeEndLease, nil)
}

// target is one host of a lease, with the reservation holding it.
type target struct {
	host          *climate.Host
	reservationID string
}

// hostFailure is one host's failure, for the lease's message.
type hostFailure struct {
	host string
	err  error
}

// maxListed bounds how many hosts' failures one error message quotes.
const maxListed = 3

func (a *Actions) run(ctx context.Context, l *climate.Lease, ev climate.EventType,
	prepare func(context.Context, *climate.Lease, *climate.Host) error) error {
	var h *Hook
	if hook, ok := a.Hooks[ev]; ok {
		h = &hook
	}
	if h == nil && prepare == nil {
		return nil
	}
	targets, err := a.targets(ctx, l, ev)
	if err != nil {
		return fmt.Errorf("%s: reading the lease's hosts: %w", ev, err)
	}
	parallel := a.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	sem := make(chan struct{}, parallel)
	var mu sync.Mutex
	var failed []hostFailure
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := a.runHost(ctx, l, ev, h, prepare, t)
			if err != nil {
				mu.Lock()
				failed = append(failed, hostFailure{host: t.host.HypervisorHostname, err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) == 0 {
		return nil
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].host < failed[j].host })
	var b strings.Builder
	fmt.Fprintf(&b, "%s failed on %d of %d hosts: ", ev, len(failed), len(targets))
	for i, f := range failed {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(failed)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "host %s: %v", f.host, f.err)
	}
	return fmt.Errorf("%s", b.String())
}

func (a *Actions) runHost(ctx context.Context, l *climate.Lease, ev climate.EventType, h *Hook,
	prepare func(context.Context, *climate.Lease, *climate.Host) error, t target) error {
	if prepare != nil {
		if err := prepare(ctx, l, t.host); err != nil {
			return err
		}
	}
	if h == nil {
		return nil
	}
	return a.Runner.Run(ctx, *h, Vars{
		Event: string(ev), LeaseID: l.ID, LeaseName: l.Name, ProjectID: l.ProjectID,
		ReservationID: t.reservationID, HostID: t.host.ID, HostName: t.host.HypervisorHostname,
		Start: l.Start, End: l.End, Token: climate.TrustToken(ctx),
	})
}

// targets lists the hosts the lease holds whole by id, each with its reservation (each
// resource type says which those are). A host no longer registered keeps its id as its
// name. After the start, a host taken back from a preemptible lease before its end is
// another lease's: events past the start leave it alone.
func (a *Actions) targets(ctx context.Context, l *climate.Lease, ev climate.EventType) ([]target, error) {
	takenBack := map[string]bool{}
	for _, r := range l.Reservations {
		for _, al := range r.Allocations {
			if ev != climate.EventStartLease && al.End.Before(l.End) {
				takenBack[al.ResourceID] = true
			}
		}
	}
	byHost := map[string]string{}
	for i := range l.Reservations {
		for _, id := range builtin.Hosts(&l.Reservations[i]) {
			if !takenBack[id] {
				byHost[id] = l.Reservations[i].ID
			}
		}
	}
	ids := make([]string, 0, len(byHost))
	for id := range byHost {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]target, 0, len(ids))
	err := a.Store.View(ctx, func(tx climate.Tx) error {
		out = out[:0]
		for _, id := range ids {
			h, err := tx.GetHost(ctx, id)
			if climate.ErrorCode(err) == climate.CodeNotFound {
				h, err = &climate.Host{ID: id, HypervisorHostname: id}, nil
			}
			if err != nil {
				return err
			}
			out = append(out, target{host: h, reservationID: byHost[id]})
		}
		return nil
	})
	return out, err
}
