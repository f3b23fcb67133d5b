package sqlite

import (
	"sort"

	"climate"
)

// rank orders events due at the same instant: a lease ending hands its hosts to one
// starting at that instant.
func rank(t climate.EventType) int {
	switch t {
	case climate.EventEndLease:
		return 0
	case climate.EventBeforeEndLease:
		return 1
	case climate.EventStartLease:
		return 2
	}
	return 3
}

// sortDue orders claimed events as dueOrder does (RETURNING rows come in no set order).
func sortDue(evs []climate.Event) {
	sort.Slice(evs, func(i, j int) bool {
		a, b := evs[i], evs[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if rank(a.Type) != rank(b.Type) {
			return rank(a.Type) < rank(b.Type)
		}
		return a.ID < b.ID
	})
}
