//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package sqlite

import "errors"

func lockFile(string) (func() error, error) { return nil, errors.ErrUnsupported }
