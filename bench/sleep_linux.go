package bench

import (
	"syscall"
	"time"
)

// sleepUntil waits for t with nanosleep: the Go runtime's timers round waits under a
// millisecond up to one when the process is idle, twice the forwarder's 0.5 ms.
func sleepUntil(t time.Time) {
	for d := time.Until(t); d > 0; d = time.Until(t) { // again if a signal cut it short
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil)
	}
}
