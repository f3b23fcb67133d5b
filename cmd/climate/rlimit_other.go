//go:build !unix

package main

import "errors"

// openFileLimit is unknown outside Unix.
func openFileLimit() (uint64, bool) { return 0, false }

func raiseOpenFileLimit() (soft, hard uint64, err error) {
	return 0, 0, errors.New("open-file limits are a Unix notion")
}
