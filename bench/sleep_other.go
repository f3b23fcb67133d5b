//go:build !linux

package bench

import "time"

// sleepUntil waits for t (Linux's version is finer below a millisecond).
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
