//go:build unix

package sqlite

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path, creating the file; nil when
// another open file holds it. Closing the file releases it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}
