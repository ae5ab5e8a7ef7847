//go:build !unix

package sqlite

// lockFile takes the lock within this process only, where there is no
// flock: two processes on one database file may then clean up at once,
// which SQLite's one writer at a time keeps correct, if not lighter.
func lockFile(path string) (unlock func(), err error) {
	return lockInProcess(path), nil
}
