package climate

import "sort"

// dueRank orders events due at the same instant: a lease ending hands its hosts to one
// starting at that instant, so ends come first.
func dueRank(t EventType) int {
	switch t {
	case EventEndLease:
		return 0
	case EventBeforeEndLease:
		return 1
	case EventStartLease:
		return 2
	}
	return 3
}

// SortDue puts claimed events in the order Tx.ClaimDueEvents promises: by time, then end
// before before-end before start, then by id. Stores use it because rows returned by a
// claiming UPDATE come in no set order.
func SortDue(evs []Event) {
	sort.Slice(evs, func(i, j int) bool {
		a, b := evs[i], evs[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if ra, rb := dueRank(a.Type), dueRank(b.Type); ra != rb {
			return ra < rb
		}
		return a.ID < b.ID
	})
}
