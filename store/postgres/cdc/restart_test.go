package cdc_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// PostgreSQL itself crashes (SIGKILL of the postmaster, on a server of the
// test's own) while the relay reads a backlog from its slot, and comes back
// through crash recovery: the relay reconnects, reads again from the slot,
// and every event committed before and after the crash is delivered, in
// order per aggregate; what the crash made it read twice is republished
// with the same ids.
func TestPostgresCrashAndRestart(t *testing.T) {
	srv := testenv.StartPostgres(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := postgres.New(pool, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cdc.Migrate(ctx, s); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, s: s, url: srv.URL}
	b := membroker.New(membroker.Options{})
	r := e.start("txbox_restart", b, nil)

	aggs := []string{"p", "q", "r"}
	counts := map[string]int{}
	writeSome := func(n int) {
		for i := range n {
			agg := aggs[i%len(aggs)]
			e.write(i%4 == 0, ev(agg, counts[agg]))
			counts[agg]++
		}
	}
	writeSome(600)
	// Crash with work in hand: the broker refuses for a while, so the
	// relay holds events it has read from the log but not delivered.
	testenv.WaitFor(t, 30*time.Second, "the first events delivered", func() bool { return len(b.Messages()) > 0 })
	b.SetDown(true)
	writeSome(100)
	time.Sleep(300 * time.Millisecond)
	srv.Kill()
	delivered := len(b.Messages())
	time.Sleep(500 * time.Millisecond)
	srv.Start()
	b.SetDown(false)
	testenv.WaitFor(t, 30*time.Second, "the pool reconnecting", func() bool { return pool.Ping(ctx) == nil })
	writeSome(300)
	total := 0
	for _, n := range counts {
		total += n
	}
	got, dups := waitFirsts(t, b.Messages, 90*time.Second, "every event after the crash", total)
	checkOrder(t, got, counts)
	t.Logf("%d events, %d delivered before the crash, %d republished copies", total, delivered, dups)
	if delivered >= 700 {
		t.Fatalf("all %d events were delivered before the crash: the broker outage did not hold any back", delivered)
	}
	if dups == 0 && delivered > 0 {
		t.Logf("no event was read twice: the slot's position had been saved up to what was delivered")
	}
	testenv.WaitFor(t, 30*time.Second, "rows archived", func() bool { return e.countRows("PENDING") == 0 })
	r.stop(t)
}
