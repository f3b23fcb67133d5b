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
