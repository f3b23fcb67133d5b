package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"climate"
	"climate/engine"
	"climate/hooks"
	"climate/postgres"
	"climate/power"
)

// actionOptions are climate serve's action hooks and power management settings.
type actionOptions struct {
	hookStart, hookEnd, hookBeforeEnd string
	timeout                           time.Duration
	attempts                          int
	backoff                           time.Duration
	parallel                          int
	powerOn, powerOff                 string
	powerOnLead, powerOffIdle         time.Duration
}

// addActionFlags adds the flags of hooks and power management to serve, and their help.
func addActionFlags(cmd *cobra.Command, o *actionOptions) {
	cmd.Long += `

Action hooks run where the engine runs, on each host of a lease, when it starts
(--hook-start), ends (--hook-end) or reaches its before-end event (--hook-before-end): a
command line, run without a shell (write sh -c '…' for one) with the lease, reservation,
host and event in CLIMATE_* environment variables, or an http(s):// URL that receives
them as JSON. Each attempt is bounded (--hook-timeout; a command's process group is
killed), failures are retried (--hook-attempts, --hook-retry-wait), and a start that still
fails puts the lease into ERROR with the hook's message (its last line on stderr).

Power management (--power-on and --power-off commands) powers off hosts that no lease
needs within --power-off-idle and powers them on --power-on-lead before a lease starts;
a lease starting on a host that is off powers it on first. Hosts show power_state and
powered_off_hours. On PostgreSQL one replica at a time does it.`
	cmd.Example += `

  # Record lease starts and ends per host, and switch idle hosts off with IPMI
  climate serve --hook-start "/usr/local/bin/prepare-host" --hook-end "https://ops.example.org/climate/end" \
    --power-on "sh -c 'ipmitool -I lanplus -H \$CLIMATE_HOST_NAME-ipmi -U admin -f /etc/climate/ipmi.pw chassis power on'" \
    --power-off "sh -c 'ipmitool -I lanplus -H \$CLIMATE_HOST_NAME-ipmi -U admin -f /etc/climate/ipmi.pw chassis power soft'" \
    --power-on-lead 10m --power-off-idle 30m`
	f := cmd.Flags()
	f.StringVar(&o.hookStart, "hook-start", "", "action run on each host of a lease when it starts: a command line (run without a shell, with CLIMATE_EVENT, CLIMATE_LEASE_ID, CLIMATE_HOST_NAME, … set) or an http(s):// URL to POST JSON to; a failure puts the lease into ERROR")
	f.StringVar(&o.hookEnd, "hook-end", "", "action run on each host of a lease when it ends (as --hook-start)")
	f.StringVar(&o.hookBeforeEnd, "hook-before-end", "", "action run on each host of a lease at its before_end_lease event (as --hook-start)")
	f.DurationVar(&o.timeout, "hook-timeout", hooks.DefaultTimeout, "most time one attempt of a hook or power command may take; a command's whole process group is killed at it")
	f.IntVar(&o.attempts, "hook-attempts", hooks.DefaultAttempts, "attempts of a hook or power command before it counts as failed")
	f.DurationVar(&o.backoff, "hook-retry-wait", hooks.DefaultBackoff, "wait before a hook's second attempt, doubled before each later one")
	f.IntVar(&o.parallel, "hook-parallel", hooks.DefaultParallel, "hosts of one lease whose hooks run at once; also power commands at once")
	f.StringVar(&o.powerOn, "power-on", "", "power management: command (or URL) that powers a host on, with CLIMATE_HOST_ID and CLIMATE_HOST_NAME set, e.g. \"sh -c 'ipmitool -I lanplus -H $CLIMATE_HOST_NAME-ipmi -U admin -f /etc/climate/ipmi.pw chassis power on'\"; needs --power-off")
	f.StringVar(&o.powerOff, "power-off", "", "power management: command (or URL) powering a host off; with it, hosts no lease needs are powered off")
	f.DurationVar(&o.powerOnLead, "power-on-lead", 10*time.Minute, "power management: how long before a lease starts its hosts are powered on (the time they take to boot, and more)")
	f.DurationVar(&o.powerOffIdle, "power-off-idle", 30*time.Minute, "power management: a free host is powered off when no lease starts on it within this long (at least --power-on-lead)")
}

// actionSet is what serve runs for hooks and power management; its zero value runs nothing.
type actionSet struct {
	engine engine.Actions // nil: standalone
	power  *power.Manager // nil: no power management
	// pg and holder: on PostgreSQL, the replica leading "power" plans, as holder.
	pg     *postgres.Store
	holder string
}

// buildActions checks the options and builds the engine's actions and power management.
// sole says this process's engine is the only one on an SQLite database; pg is the
// PostgreSQL store (nil on SQLite); maxSleep bounds power management's sleep on SQLite
// when other processes' commits cannot wake it (0: none).
func buildActions(o *actionOptions, st climate.Store, clk climate.Clock, log *slog.Logger, sole bool, pg *postgres.Store, maxSleep time.Duration) (*actionSet, error) {
	set := &actionSet{}
	if o.hookStart == "" && o.hookEnd == "" && o.hookBeforeEnd == "" && o.powerOn == "" && o.powerOff == "" {
		return set, nil // standalone: statuses only
	}
	if o.attempts < 1 {
		return nil, fmt.Errorf("--hook-attempts %d: want at least 1", o.attempts)
	}
	if o.timeout <= 0 || o.backoff < 0 || o.parallel < 1 {
		return nil, fmt.Errorf("--hook-timeout, --hook-retry-wait and --hook-parallel: want a positive timeout, a wait of 0 or more and at least 1 host")
	}
	specs := map[climate.EventType]string{climate.EventStartLease: o.hookStart, climate.EventEndLease: o.hookEnd, climate.EventBeforeEndLease: o.hookBeforeEnd}
	flags := map[climate.EventType]string{climate.EventStartLease: "--hook-start", climate.EventEndLease: "--hook-end", climate.EventBeforeEndLease: "--hook-before-end"}
	hooksByEvent := map[climate.EventType]hooks.Hook{}
	for ev, spec := range specs {
		if spec == "" {
			continue
		}
		h, err := parseHook(flags[ev], spec)
		if err != nil {
			return nil, err
		}
		hooksByEvent[ev] = h
	}
	if (o.powerOn == "") != (o.powerOff == "") {
		return nil, errors.New("power management needs both --power-on and --power-off")
	}
	backoff := o.backoff
	if backoff == 0 {
		backoff = -1 // hooks.Runner: no wait
	}
	runner := &hooks.Runner{Timeout: o.timeout, Attempts: o.attempts, Backoff: backoff, Clock: clk, Logger: log}
	acts := &hooks.Actions{Store: st, Runner: runner, Hooks: hooksByEvent, Parallel: o.parallel}
	if o.powerOn != "" {
		if o.powerOnLead <= 0 || o.powerOffIdle < 0 {
			return nil, fmt.Errorf("--power-on-lead %s, --power-off-idle %s: want a positive lead and an idle time of 0 or more", o.powerOnLead, o.powerOffIdle)
		}
		on, err := parseHook("--power-on", o.powerOn)
		if err != nil {
			return nil, err
		}
		off, err := parseHook("--power-off", o.powerOff)
		if err != nil {
			return nil, err
		}
		switchHost := func(ctx context.Context, h *climate.Host, powerOn bool) error {
			hook, event := off, "power_off"
			if powerOn {
				hook, event = on, "power_on"
			}
			return runner.Run(ctx, hook, hooks.Vars{Event: event, HostID: h.ID, HostName: h.HypervisorHostname})
		}
		// A switch recorded longer ago than its command can take, with its retries, was a
		// dead process's.
		stale := time.Duration(o.attempts)*o.timeout + o.backoff*(1<<min(o.attempts, 16)) + time.Minute
		cfg := power.Config{Lead: o.powerOnLead, Idle: o.powerOffIdle, Switch: switchHost,
			Parallel: o.parallel, Stale: stale, Sole: sole, MinInterval: powerMinInterval, Logger: log}
		if maxSleep > 0 {
			// --role engine: the API's commits cannot wake it; a lease is seen within this.
			cfg.MaxSleep = max(maxSleep, powerMaxSleepSQLite)
		}
		if pg != nil {
			set.pg, set.holder = pg, climate.NewID()
			cfg.MaxSleep = powerMaxSleepPostgres // renews the lead well within its TTL
			cfg.Leader = func(ctx context.Context) (bool, error) {
				return pg.TryLead(ctx, "power", set.holder, powerLeadTTL)
			}
		}
		set.power = power.New(st, clk, cfg)
		acts.PrepareStart = set.power.EnsureOn
	}
	if len(hooksByEvent) > 0 || acts.PrepareStart != nil {
		set.engine = acts
	}
	return set, nil
}

// parseHook reads a hook flag; a command's program must be found now, not at a lease's start.
func parseHook(flag, spec string) (hooks.Hook, error) {
	h, err := hooks.Parse(spec)
	if err != nil {
		return h, fmt.Errorf("%s: %v", flag, err)
	}
	if len(h.Argv) > 0 {
		if _, err := exec.LookPath(h.Argv[0]); err != nil {
			return h, fmt.Errorf("%s: program %q not found (give its path, or put it in PATH)", flag, h.Argv[0])
		}
	}
	return h, nil
}

// wake makes power management plan again (a commit, an event handled).
func (a *actionSet) wake() {
	if a.power != nil {
		a.power.Wake()
	}
}

// observe chains power management's wake-up after an engine report handler.
func (a *actionSet) observe(next func(engine.Report)) func(engine.Report) {
	return func(r engine.Report) {
		next(r)
		a.wake()
	}
}

// run starts power management, if configured: on PostgreSQL in the one replica that leads
// "power". It returns at once; wg tracks it until ctx is done.
func (a *actionSet) run(ctx context.Context, wg *sync.WaitGroup) {
	if a.power == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = a.power.Run(ctx)
		if a.pg != nil { // another replica takes over at once
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = a.pg.Resign(rctx, "power", a.holder)
		}
	}()
}

// powerLeadTTL is how long a replica's lead of power management lasts unless renewed; it
// renews at every planning round, at least every powerMaxSleepPostgres.
// powerMaxSleepSQLite bounds its sleep in a separate engine process on SQLite;
// powerMinInterval spaces its rounds under a stream of commits (a round over 5,000 hosts
// and 50,000 leases reads for about 0.25 s).
const (
	powerMinInterval      = 2 * time.Second
	powerLeadTTL          = time.Minute
	powerMaxSleepPostgres = 20 * time.Second
	powerMaxSleepSQLite   = 10 * time.Second
)
