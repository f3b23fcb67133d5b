package climate

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Input limits. Nothing a client sends may size an allocation or a loop beyond these, and
// every text has a maximum length, checked before a store sees it, so both stores accept
// and refuse the same inputs (PostgreSQL's btree indexes refuse keys over about 2,700
// bytes, SQLite has no such limit).
const (
	// MaxNameLength bounds names and identifiers: host names, service names, availability
	// zones, user, project and role names. (Lease names keep Blazar's 80.)
	MaxNameLength = 255
	// MaxTextLength bounds free text: cpu_info, hypervisor_type, extra capability values,
	// property queries.
	MaxTextLength = 65536
	// MaxReservations bounds the reservations of one lease.
	MaxReservations = 100
	// MaxCount bounds integers stored as 32-bit columns (host sizes, reservation counts).
	MaxCount = math.MaxInt32
	// MaxDuration bounds durations (a lease's "duration", a timeline's step, …).
	MaxDuration = 100 * 365 * 24 * time.Hour
)

// Dates are accepted between MinDate and MaxDate: far enough apart for any lease, and
// close enough that the distance between any two of them fits a time.Duration (±292
// years), so no computation on dates overflows.
var (
	MinDate = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxDate = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// CheckText refuses a text longer than max characters, or holding a NUL character (which
// PostgreSQL's text cannot store), naming the field and the limit.
func CheckText(field, value string, max int) error {
	if strings.IndexByte(value, 0) >= 0 {
		return Errorf(CodeInvalid, "%s must not contain NUL characters", field)
	}
	if n := utf8.RuneCountInString(value); n > max {
		return Errorf(CodeInvalid, "%s is too long: %d characters, at most %d", field, n, max)
	}
	return nil
}

// CheckDate refuses a date outside [MinDate, MaxDate).
func CheckDate(field string, t time.Time) error {
	if t.Before(MinDate) || !t.Before(MaxDate) {
		return Errorf(CodeInvalid, "%s %s is out of range: dates must be from %s to %s", field,
			t.UTC().Format("2006-01-02 15:04"), MinDate.Format("2006-01-02"), MaxDate.Add(-time.Minute).Format("2006-01-02 15:04"))
	}
	return nil
}
