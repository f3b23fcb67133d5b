//go:build race

package manager_test

import "flag"

// Under the race detector SQLite runs about twenty times slower: the default simulation
// is a shorter one of the same density (a 60-day run takes about 4 minutes).
func init() {
	_ = flag.Set("sim.leases", "170")
	_ = flag.Set("sim.days", "5")
}
