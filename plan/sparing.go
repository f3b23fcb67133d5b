package plan

import (
	"slices"

	"climate"
)

// Sparing scarce hosts. Best fit alone may give an unfiltered request a GPU host while a
// plain one is free, and push back the next request that needs a GPU. So the index
// remembers the property filters requests have used (the filters it caches, carried over
// when the index is rebuilt: KeepFilters) and counts, per host, how many of them it
// matches among those that do not match every host: its demand. PlaceHosts takes the
// least demanded hosts first and, among them, the best fit in time.

// WithSparing turns sparing on (the default) or off (for comparison: BenchmarkSparing).
func WithSparing(on bool) Option {
	return func(x *Index) { x.noSparing = !on }
}

// remember records a filter a request used, so the demand is counted again.
// The caller holds x.mu.
func (x *Index) remember(key string, match func(*climate.Host) bool) {
	if match == nil || key == "" || x.matches[key] != nil {
		return
	}
	if len(x.matches) >= maxCachedFilters {
		x.matches = map[string]func(*climate.Host) bool{}
		x.demand = nil
	}
	x.matches[key] = match
	if x.demand != nil {
		// The one new filter, not all of them again; on a copy, as readers hold the old.
		d := slices.Clone(x.demand)
		x.count(d, match)
		x.demand = d
	}
}

// KeepFilters carries the filters prev's requests used over to x (a rebuilt index), so
// the hosts they ask for stay spared.
func (x *Index) KeepFilters(prev *Index) {
	prev.mu.Lock()
	defer prev.mu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, m := range prev.matches {
		if x.matches[k] == nil && len(x.matches) < maxCachedFilters {
			x.matches[k] = m
			x.demand = nil
		}
	}
}

// demandOf returns, per host, how many remembered filters it matches among those that
// leave some reservable host out; nil when sparing is off. It is counted once per index
// and then kept up to date as filters are remembered.
func (x *Index) demandOf() []int32 {
	if x.noSparing {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.demand != nil {
		return x.demand
	}
	demand := make([]int32, len(x.hosts))
	for _, match := range x.matches {
		x.count(demand, match)
	}
	x.demand = demand
	return demand
}

// count adds to demand the hosts match asks for, unless it asks for every reservable host
// (a filter every host matches spares none). The caller holds x.mu.
func (x *Index) count(demand []int32, match func(*climate.Host) bool) {
	var matched []int32
	reservable := 0
	for i := range x.hosts {
		if x.hosts[i].Reservable {
			reservable++
			if match(&x.hosts[i]) {
				matched = append(matched, int32(i))
			}
		}
	}
	if len(matched) == reservable {
		return
	}
	for _, p := range matched {
		demand[p]++
	}
}
