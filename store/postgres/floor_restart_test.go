package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox/store/postgres"
)

// TRUNCATE ... RESTART IDENTITY sets the sequence back below the claim
// floor: the rows written next must be claimed at once, not only after the
// next look below the floor (an hour here, a minute by default).
func TestFloorFollowsRestartIdentity(t *testing.T) {
	s := floorStore(t, time.Hour, nil)
	writeRows(t, s, "a", 200)
	for len(drainOnce(t, s, 100)) > 0 {
	}
	if !churnUntil(t, s, 10*time.Second, func() bool { return postgres.Floor(s) > 100 }) {
		t.Fatalf("the floor did not rise: %d", postgres.Floor(s))
	}
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `TRUNCATE `+s.Tables().Outbox+` RESTART IDENTITY`); err != nil {
		t.Fatal(err)
	}
	writeRows(t, s, "b", 5)
	got := 0
	for end := time.Now().Add(3 * time.Second); got < 5 && time.Now().Before(end); {
		got += len(drainOnce(t, s, 100))
		time.Sleep(10 * time.Millisecond)
	}
	if got != 5 {
		t.Fatalf("claimed %d of the 5 rows written after RESTART IDENTITY (floor %d)", got, postgres.Floor(s))
	}
}
