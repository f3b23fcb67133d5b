//go:build !unix

package bench

import "errors"

// raiseOpenFileLimit: open-file limits are a Unix notion.
func raiseOpenFileLimit() (soft, hard uint64, err error) {
	return 0, 0, errors.New("open-file limits are a Unix notion")
}
