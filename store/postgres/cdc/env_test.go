package cdc_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// TestMain stops the private PostgreSQL the tests may have shared (when the
// shared server lacks logical decoding) once they all ran.
func TestMain(m *testing.M) { os.Exit(testenv.RunPackage(m)) }

// env is a migrated outbox with its publication, on the test's own tables;
// every slot a test names through it is dropped when the test ends.
type env struct {
	t   *testing.T
	s   *postgres.Store
	url string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := storeenv.OpenLogicalPostgres(t, postgres.Options{})
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cdc.Migrate(ctx, s); err != nil {
		t.Fatalf("migrate cdc: %v", err)
	}
	e := &env{t: t, s: s, url: storeenv.LogicalPostgresURL(t)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = s.Pool().Exec(ctx, "DROP PUBLICATION IF EXISTS "+cdc.Publication(s))
		_, _ = s.Pool().Exec(ctx, "DROP TABLE IF EXISTS "+s.Tables().Outbox+"_cdc_slots")
	})
	return e
}

// slot returns a unique slot name, dropped (once no relay reads it) when
// the test ends: a slot left behind would hold WAL for ever.
func (e *env) slot() string {
	name := "txbox_test_" + strings.ToLower(txbox.NewID()[24:])
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			_, err := e.s.Pool().Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
			if err != nil {
				e.t.Logf("drop slot %s: %v", name, err)
			}
			if err == nil || ctx.Err() != nil {
				if err != nil {
					e.t.Errorf("slot %s left behind: %v", name, err)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return name
}

// running is a CDC relay on its own goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
	r      *cdc.Reader
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("relay: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay did not stop")
	}
}

func (e *env) start(slot string, pub broker.Publisher, tweak func(*cdc.Config)) *running {
	return e.startAs(slot, pub, tweak, false)
}

// waitActive waits until a relay reads the slot.
func (e *env) waitActive(slot string) {
	e.t.Helper()
	testenv.WaitFor(e.t, 20*time.Second, "slot "+slot+" active", func() bool {
		var active bool
		_ = e.s.Pool().QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
		return active
	})
}

// startAs starts a relay; a standby is not waited for.
func (e *env) startAs(slot string, pub broker.Publisher, tweak func(*cdc.Config), standby bool) *running {
	e.t.Helper()
	cfg := cdc.Config{Store: e.s, ConnString: e.url, Slot: slot, StandbyRetry: 200 * time.Millisecond,
		StatusInterval: 200 * time.Millisecond,
		Relay:          relay.Config{Publisher: pub, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond}}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := cdc.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan struct{}), r: r}
	go func() { run.err = r.Run(ctx); close(run.done) }()
	if !standby {
		// Tableless events exist only in the log: one written before the
		// slot reached its consistent point is in no slot. Wait until the
		// relay reads its slot.
		testenv.WaitFor(e.t, 60*time.Second, "relay reading "+slot, r.Reading)
	}
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-run.done:
		case <-time.After(30 * time.Second):
		}
	})
	return run
}

// write commits events in one transaction, as rows or (tableless) as
// logical decoding messages.
func (e *env) write(tableless bool, events ...txbox.Event) {
	e.t.Helper()
	var opts []outbox.Option
	if tableless {
		opts = append(opts, outbox.WithCDCMessages())
	}
	w := outbox.NewWriter(e.s.Dialect(), opts...)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.s.Pool(), func(tx pgx.Tx) error { return pgxtx.Add(ctx, tx, w, events...) })
	if err != nil {
		e.t.Fatal(err)
	}
}

func ev(agg string, n int) txbox.Event {
	p, _ := json.Marshal(map[string]any{"agg": agg, "n": n})
	return txbox.Event{ID: txbox.NewID(), AggregateType: "order", AggregateID: agg, Type: "order.step", Payload: p}
}

// seq reads the payload's n of a published message.
func seq(m broker.Message) (string, int) {
	var p struct {
		Agg string `json:"agg"`
		N   int    `json:"n"`
	}
	_ = json.Unmarshal(m.Event.Payload, &p)
	return p.Agg, p.N
}

// countRows counts outbox rows by status.
func (e *env) countRows(status string) int {
	e.t.Helper()
	var n int
	if err := e.s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+e.s.Tables().Outbox+` WHERE status = $1`, status).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) countSent() int {
	e.t.Helper()
	var n int
	if err := e.s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+e.s.Tables().Outbox+`_sent`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// firsts reduces published messages to their first copies by event id, in
// order, and counts the copies.
func firsts(msgs []broker.Message) (out []broker.Message, dups int) {
	seen := map[string]bool{}
	for _, m := range msgs {
		if seen[m.Event.ID] {
			dups++
			continue
		}
		seen[m.Event.ID] = true
		out = append(out, m)
	}
	return out, dups
}

// waitFirsts waits until published (a broker's Messages) holds n distinct
// events and returns their first copies, in order, and the count of
// repeated copies; more than n distinct events fail the test.
func waitFirsts(t *testing.T, published func() []broker.Message, timeout time.Duration, what string, n int) ([]broker.Message, int) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, func() bool { f, _ := firsts(published()); return len(f) >= n })
	got, dups := firsts(published())
	if len(got) != n {
		t.Fatalf("%d distinct events delivered, want %d", len(got), n)
	}
	return got, dups
}

// checkOrder fails unless every aggregate's events 0..n-1 arrived once
// each (first copies) in order.
func checkOrder(t *testing.T, msgs []broker.Message, want map[string]int) {
	t.Helper()
	next := map[string]int{}
	for _, m := range msgs {
		agg, n := seq(m)
		if n != next[agg] {
			t.Fatalf("aggregate %s: event %d arrived when %d was due", agg, n, next[agg])
		}
		next[agg]++
	}
	for agg, n := range want {
		if next[agg] != n {
			t.Errorf("aggregate %s: %d events delivered, want %d", agg, next[agg], n)
		}
	}
}
