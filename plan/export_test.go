package plan

// SetScarceAfter makes placements ask the free-time summary after n candidates, so that
// a small book exercises it, until restore is called.
func SetScarceAfter(n int) (restore func()) {
	old := scarceAfter
	scarceAfter = n
	return func() { scarceAfter = old }
}

// Refusal is the summary's answer to r, as a placement short of hosts gets it.
func (x *Index) Refusal(r HostRequest) (Explanation, bool) {
	s, e, skip, reclaim := x.terms(&r)
	ex := Explanation{Requested: r.Min, Registered: len(x.hosts), Cleaning: x.Cleaning()}
	return x.refusal(&r, x.candidates(&r), s, e, skip, reclaim, ex)
}

// SetBusyHours turns the busy-hour rows on or off for placements until restore is called.
func (x *Index) SetBusyHours(on bool) (restore func()) {
	old := x.hours.off
	x.hours.off = !on
	return func() { x.hours.off = old }
}

// ProvedBusy returns the hosts the busy-hour rows mark busy over w (building at most one
// row, as a placement does).
func (x *Index) ProvedBusy(w Window) []string {
	s, e := x.window(w)
	var mask hourMask
	x.busyHours(&mask, s, e)
	var ids []string
	for p := range x.hosts {
		if mask.busy(int32(p)) {
			ids = append(ids, x.hosts[p].ID)
		}
	}
	return ids
}

// FreeWhole reports whether host id is free to be given whole over w to a new lease that
// takes nothing back.
func (x *Index) FreeWhole(id string, w Window) bool {
	s, e := x.window(w)
	free, _, _, _ := x.neighbours(x.pos[id], s, e, -1, noReclaim)
	return free
}
