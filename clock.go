package climate

import "time"

// Clock tells the time and makes timers. The engine takes one so tests can drive time.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the engine uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}
