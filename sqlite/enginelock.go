package sqlite

import "errors"

// ErrEngineLocked means another process runs an event engine on the same database.
var ErrEngineLocked = errors.New("another process runs an event engine on this database")

// LockEngine takes the lock that lets one event engine at a time run on the database at
// path: an exclusive flock on path+".engine.lock", which the kernel releases when the
// process exits, however it dies. Its holder knows that any claim it finds on events
// belongs to a run that is dead (engine.Config.Sole), so a restart takes them back at
// once instead of waiting for them to expire. It fails with ErrEngineLocked while another
// process holds the lock, and with errors.ErrUnsupported where flock is missing.
func LockEngine(path string) (release func() error, err error) {
	return lockFile(path + ".engine.lock")
}
