package testenv

import (
	"os"
	"testing"
)

// SharedDir makes a directory of the system's temporary one with mode perm,
// removed when the test ends, for a server that runs as a user of its own
// (mosquitto drops root for its own user) and must reach what it holds:
// t.TempDir's parent is private to the test's user.
func SharedDir(t testing.TB, prefix string, perm os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}
