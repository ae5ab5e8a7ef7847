package faults

import (
	"errors"
	"testing"
)

// A fault the database refused for other sessions' locks is tried again;
// any other failure is not.
func TestContendedFaultsAreTriedAgain(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("outbox_event_sent: Lock wait timeout exceeded; try restarting transaction"), true},
		{errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"), true},
		{errors.New("ERROR: deadlock detected (SQLSTATE 40P01)"), true},
		{errors.New("ERROR: canceling statement due to lock timeout (SQLSTATE 55P03)"), true},
		{errors.New("Error 1146 (42S02): Table 'x.outbox_event' doesn't exist"), false},
		{errors.New("connection refused"), false},
	} {
		if got := contended(c.err); got != c.want {
			t.Errorf("contended(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
