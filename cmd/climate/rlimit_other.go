//go:build !unix

package main

// openFileLimit is unknown outside Unix.
func openFileLimit() (uint64, bool) { return 0, false }
