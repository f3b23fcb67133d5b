package manager

import (
	"context"
	"fmt"
	"slices"
	"time"

	"climate"
)

// Enforcement is the operator's fair-use rules on lease durations (Blazar's
// [enforcement] MaxLeaseDurationFilter, and Chameleon's extension window).
type Enforcement struct {
	// MaxLeaseDuration bounds a lease's length; 0: unbounded.
	MaxLeaseDuration time.Duration
	// ExtensionWindow, when set, lets a lease's end move later only within this long
	// before its current end (a lease is renewed near its end, not booked far ahead).
	ExtensionWindow time.Duration
	// ExemptProjects are the projects these rules, and the External service, do not
	// apply to.
	ExemptProjects []string
	// External, when set, is the operator's service that allows or refuses each lease
	// creation and update (enforce.External: Blazar's ExternalServiceFilter).
	External LeaseChecker
}

// ProjectDirectory tells whether a project exists (keystone.Client).
type ProjectDirectory interface {
	ProjectExists(ctx context.Context, id string) (bool, error)
}

// LeaseChecker allows or refuses lease changes (enforce.External).
type LeaseChecker interface {
	CheckCreate(ctx context.Context, who climate.Identity, l *climate.Lease) error
	CheckUpdate(ctx context.Context, who climate.Identity, cur, l *climate.Lease) error
}

// rules are the fair-use rules one project is held to: the server's, with the
// project's own limits over them.
type rules struct {
	project     string
	exempt      bool
	maxDuration time.Duration
}

// rulesFor returns the rules project is held to before planning. Its limits are read
// only when a server-wide rule or a dry run needs them (to know whether it is exempt,
// or its own maximum duration): otherwise the write transaction checks them
// (Manager.account), and a creation pays no extra read.
func (m *Manager) rulesFor(ctx context.Context, project string, dryRun bool) (rules, error) {
	e := m.cfg.Enforcement
	r := rules{project: project, maxDuration: e.MaxLeaseDuration, exempt: slices.Contains(e.ExemptProjects, project)}
	if r.exempt || !(dryRun || e.External != nil || e.MaxLeaseDuration > 0 || e.ExtensionWindow > 0) {
		return r, nil
	}
	var lim *climate.ProjectLimits
	err := m.store.View(ctx, func(tx climate.Tx) error {
		var err error
		lim, _, err = tx.GetProjectLimits(ctx, project)
		return err
	})
	if err != nil {
		return r, err
	}
	r.exempt = m.exempt(project, lim)
	if lim != nil && lim.MaxLeaseDuration != nil {
		r.maxDuration = *lim.MaxLeaseDuration
	}
	return r, nil
}

// exempt reports whether project is exempt from every rule: by the server's
// configuration or by its limits.
func (m *Manager) exempt(project string, lim *climate.ProjectLimits) bool {
	return slices.Contains(m.cfg.Enforcement.ExemptProjects, project) || (lim != nil && lim.Exempt)
}

// checkExternal asks the operator's service, if there is one, about creating l (cur nil)
// or changing cur into l. It is asked before planning and outside any transaction: its
// answer may take a while.
func (m *Manager) checkExternal(ctx context.Context, r rules, who climate.Identity, cur, l *climate.Lease) error {
	e := m.cfg.Enforcement
	if e.External == nil || r.exempt {
		return nil
	}
	if cur == nil {
		return e.External.CheckCreate(ctx, who, l)
	}
	return e.External.CheckUpdate(ctx, who, cur, l)
}

// checkDuration refuses, as Blazar's MaxLeaseDurationFilter does, a lease longer than
// the maximum, saying what would fit. (Blazar answers 400; a refusal by rule is a 403
// here.)
func (r rules) checkDuration(start, end time.Time) error {
	if r.maxDuration <= 0 || r.exempt {
		return nil
	}
	if d := end.Sub(start); d > r.maxDuration {
		return climate.Errorf(climate.CodeForbidden,
			"Lease duration of %d seconds must be less than or equal to the maximum lease duration of %d seconds (%s): the longest lease from %s ends at %s.",
			int64(d.Seconds()), int64(r.maxDuration.Seconds()), r.maxDuration, fmtTime(start), fmtTime(start.Add(r.maxDuration)))
	}
	return nil
}

// checkExtension refuses moving cur's end later before the extension window opens.
func (m *Manager) checkExtension(r rules, cur *climate.Lease, newEnd, now time.Time) error {
	e := m.cfg.Enforcement
	if e.ExtensionWindow <= 0 || !newEnd.After(cur.End) || r.exempt {
		return nil
	}
	if opens := cur.End.Add(-e.ExtensionWindow); now.Before(opens) {
		return climate.Errorf(climate.CodeForbidden,
			"Lease %s can be extended only within %s of its end: from %s on.", cur.Name, fmtWindow(e.ExtensionWindow), fmtTime(opens))
	}
	return nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.DateTime) }

// fmtWindow writes a window as hours when it is whole hours ("48h"), else as Go does.
func fmtWindow(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", int64(d.Hours()))
	}
	return d.String()
}
