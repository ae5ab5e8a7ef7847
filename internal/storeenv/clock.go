package storeenv

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/sqlite"
)

// Clock is a host clock a test can move: time.Now plus an offset. It is
// SQLite's Options.Now in the harnesses.
type Clock struct{ offset atomic.Int64 }

// Now is the moved time.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Jump moves the clock by d.
func (c *Clock) Jump(d time.Duration) { c.offset.Add(int64(d)) }

var sqliteClocks sync.Map // *sqlite.Store -> *Clock

// TrackClock records that s reads c, so that SQLite.JumpClock can move it.
func TrackClock(t testing.TB, s *sqlite.Store, c *Clock) {
	sqliteClocks.Store(s, c)
	t.Cleanup(func() { sqliteClocks.Delete(s) })
}

// JumpClock implements storetest.ClockHarness: SQLite's clock is the
// store's Options.Now.
func (SQLite) JumpClock(t *testing.T, s store.Store, d time.Duration) {
	t.Helper()
	c, ok := sqliteClocks.Load(s)
	if !ok {
		t.Fatalf("storeenv: %T has no movable clock (open it with OpenSQLite or TrackClock)", s)
	}
	c.(*Clock).Jump(d)
}

// JumpClock implements storetest.ClockHarness: PostgreSQL's leases run on
// the server's clock, which a test cannot move, so the rows move instead.
func (Postgres) JumpClock(t *testing.T, s store.Store, d time.Duration) {
	t.Helper()
	ps := s.(*postgres.Store)
	_, err := ps.Pool().Exec(context.Background(), `UPDATE `+ps.Tables().Qualified(ps.Tables().Outbox)+`
		SET locked_until = locked_until - $1 * interval '1 microsecond',
		    next_retry_at = next_retry_at - $1 * interval '1 microsecond'`, d.Microseconds())
	if err != nil {
		t.Fatalf("move the rows' clock by %v: %v", d, err)
	}
}

// JumpClock implements storetest.ClockHarness as for PostgreSQL.
func (MySQL) JumpClock(t *testing.T, s store.Store, d time.Duration) {
	t.Helper()
	ms := s.(*mysql.Store)
	_, err := ms.DB().ExecContext(context.Background(), `UPDATE `+ms.Tables().Outbox+`
		SET locked_until = locked_until - INTERVAL ? MICROSECOND,
		    next_retry_at = next_retry_at - INTERVAL ? MICROSECOND`, d.Microseconds(), d.Microseconds())
	if err != nil {
		t.Fatalf("move the rows' clock by %v: %v", d, err)
	}
}
