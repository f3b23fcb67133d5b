package plan

import (
	"slices"
	"sync"
	"time"
)

// busyHours proves hosts busy without reading their holds. A placement otherwise looks
// at every busy host it passes on its way to enough free ones (about 570 a request at
// 5,000 hosts in bench api's 16-client run), and each look is a cache miss or more into
// that host's own slice of holds: 40 µs a placement with the index in the CPU's cache,
// 125–155 µs after other work has pushed it out, as it is when served.
//
// Row h has bit p set when host p has a hold that is not preemptible over all of hour h
// (its end padded by the cleaning time, as the index stores it). Such a host is busy for
// any request whose window meets hour h, whoever asks and whenever they may take holds
// back. A placement for a new lease ORs the rows of the hours its window meets into a
// mask (hourMask) and skips the hosts it marks; it reads the holds of the others only, and
// chooses what it chose before (the rows only ever mark hosts neighbours finds busy).
//
// Building rows costs a pass over every host's holds, what a scan of them all would. So a
// placement builds the rows it lacked only after its own scan read at least a
// sixteenth of the hosts busy (rowsAfter): a placement that finds its hosts early (a
// cloud mostly free, a floating IP) never builds any, and each pass is paid for by
// sixteen such scans. Apply keeps the rows current. They are bounded by
// maxBusyHoursBytes and dropped all at once when full, like the filter cache.
type busyHours struct {
	mu   sync.Mutex // placements build rows concurrently; Apply changes them alone
	rows map[int64][]uint64
	off  bool // placements ignore the rows (the tests' reference placement)
}

const (
	hourMicros = int64(time.Hour / time.Microsecond)
	// maxBusyHoursBytes bounds the rows: 53,000 hours at 5,000 hosts, 2,700 (112 days)
	// at 100,000.
	maxBusyHoursBytes = 32 << 20
	// maxMaskRows bounds the rows a placement ORs: a longer window samples its hours
	// evenly (any hour the window meets proves a host busy; the scan finds the rest).
	maxMaskRows = 32
	// rowsAfter: a placement builds its missing rows once it read this share of the
	// hosts (1/rowsAfter) busy.
	rowsAfter = 16
)

// words is the length of a row: a bit per host.
func (x *Index) words() int { return (len(x.hosts) + 63) / 64 }

// hourMask is the busy hours a placement's window meets: a host is proved busy when any
// of its rows marks it. It ORs the rows a word (64 hosts) at a time, as the scan reaches
// them, rather than whole rows a placement never reads to their ends.
type hourMask struct {
	rows    [maxMaskRows][]uint64 // arrays: a placement's mask stays on its stack
	n       int
	missing [maxMaskRows]int64 // the hours sampled without a row, ascending
	lacking int
	word    int
	bits    uint64 // the rows' OR at word
}

// busy reports whether the rows prove host p busy.
func (m *hourMask) busy(p int32) bool {
	if m.n == 0 {
		return false
	}
	if w := int(p >> 6); w != m.word {
		m.word, m.bits = w, 0
		for _, r := range m.rows[:m.n] {
			m.bits |= r[w]
		}
	}
	return m.bits&(1<<(p&63)) != 0
}

// busyHours sets m to the kept rows of the hours [s, e) meets (at most maxMaskRows of
// them, evenly spread), noting those it lacks.
func (x *Index) busyHours(m *hourMask, s, e int64) {
	h := &x.hours
	m.n, m.lacking, m.word = 0, 0, -1
	if h.off || e <= s {
		return
	}
	first, last := floorDiv(s, hourMicros), floorDiv(e-1, hourMicros)
	n := min(last-first+1, maxMaskRows)
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range n {
		hour := first + k*(last-first+1)/n
		if row := h.rows[hour]; row != nil {
			m.rows[m.n] = row
			m.n++
		} else {
			m.missing[m.lacking] = hour
			m.lacking++
		}
	}
}

// scanned builds the rows m lacked when the placement read busy hosts' holds to find
// them busy: enough that the pass pays (rowsAfter).
func (x *Index) scanned(m *hourMask, busy int) {
	if m.lacking == 0 || busy*rowsAfter < len(x.hosts) {
		return
	}
	hours := m.missing[:m.lacking]
	x.hours.keep(hours, x.hourRows(hours), x.words())
}

// keep stores built rows, dropping every row first when the bound would be passed.
func (h *busyHours) keep(hours []int64, rows [][]uint64, words int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rows == nil || (len(h.rows)+len(rows))*words*8 > maxBusyHoursBytes {
		h.rows = make(map[int64][]uint64, len(rows))
	}
	for i, hour := range hours {
		h.rows[hour] = rows[i]
	}
}

// hourRows builds the rows of hours (ascending) in one pass over the hosts' holds: a
// row a host costs a placement's look at that host.
func (x *Index) hourRows(hours []int64) [][]uint64 {
	rows := make([][]uint64, len(hours))
	for i := range rows {
		rows[i] = make([]uint64, x.words())
	}
	lo, hi := hours[0]*hourMicros, (hours[len(hours)-1]+1)*hourMicros
	for p, b := range x.busy {
		for i := endsAfter(b, lo); i < len(b) && b[i].start < hi; i++ {
			if b[i].soft {
				continue
			}
			// The hours wholly in the hold: from the first that starts at or after its
			// start to the last that ends at or before its end.
			from, _ := slices.BinarySearch(hours, ceilDiv(b[i].start, hourMicros))
			for k := from; k < len(hours) && (hours[k]+1)*hourMicros <= b[i].end; k++ {
				rows[k][p>>6] |= 1 << (p & 63)
			}
		}
	}
	return rows
}

// holdsHour reports whether host p has a hold, not preemptible, over all of [lo, hi).
// Its holds are sorted by start and by end, so those that start by lo and end after it
// follow the first that ends after it.
func (x *Index) holdsHour(p int32, lo, hi int64) bool {
	b := x.busy[p]
	for i := endsAfter(b, lo); i < len(b) && b[i].start <= lo; i++ {
		if !b[i].soft && b[i].end >= hi {
			return true
		}
	}
	return false
}

// refreshHours brings host p's bits up to date in the kept rows of the hours that hold
// iv, just added or removed, wholly covers: the only rows the change can move. An added
// hold marks them; a removed one leaves those another hold covers (holds padded by the
// cleaning time may overlap).
func (x *Index) refreshHours(p int32, iv interval, added bool) {
	h := &x.hours
	if iv.soft || len(h.rows) == 0 {
		return
	}
	first, last := ceilDiv(iv.start, hourMicros), floorDiv(iv.end, hourMicros)-1
	bit, word := uint64(1)<<(p&63), p>>6
	set := func(hour int64, row []uint64) {
		if added || x.holdsHour(p, hour*hourMicros, (hour+1)*hourMicros) {
			row[word] |= bit
		} else {
			row[word] &^= bit
		}
	}
	if last-first+1 > int64(len(h.rows)) { // a long hold: visit the kept rows instead
		for hour, row := range h.rows {
			if hour >= first && hour <= last {
				set(hour, row)
			}
		}
		return
	}
	for hour := first; hour <= last; hour++ {
		if row := h.rows[hour]; row != nil {
			set(hour, row)
		}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
