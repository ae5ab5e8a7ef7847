package inbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store/postgres"
)

// settled is a delivery that records its fate.
type settled struct {
	ev    txbox.Event
	fate  string // "ack", "nak" or "" while unsettled
	times int
}

func (d *settled) Event() (txbox.Event, error) { return d.ev, nil }
func (d *settled) Raw() broker.RawMessage      { return broker.RawMessage{ID: d.ev.ID} }
func (d *settled) Attempt() int                { return 1 }
func (d *settled) Ack(context.Context) error   { d.fate, d.times = "ack", d.times+1; return nil }
func (d *settled) Nak(context.Context, time.Duration) error {
	d.fate, d.times = "nak", d.times+1
	return nil
}

// pipelineEnv is a pgx consumer in shared-transaction mode whose handler
// runs, per event, the statement and arguments the test gives it.
type pipelineEnv struct {
	t       *testing.T
	s       *postgres.Store
	c       *Consumer
	effects *storeenv.Effects
	stmt    map[string]func() (string, []any) // event id -> the handler's statement
}

func newPipelineEnv(t *testing.T) *pipelineEnv {
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	e := &pipelineEnv{t: t, s: s, effects: storeenv.NewEffects(t, s, storeenv.Postgres{}.SQLDB(t, s)), stmt: map[string]func() (string, []any){}}
	c, err := New(s, Config{Name: "pipe", Subscriber: membroker.New(membroker.Options{}).Subscribe("pipe"),
		TxBatch: 100, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			q, args := e.insert(ev)
			if f, ok := e.stmt[ev.ID]; ok {
				q, args = f()
			}
			_, err := tx.Exec(ctx, q, args...)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

func (e *pipelineEnv) insert(ev txbox.Event) (string, []any) {
	return e.effects.Upsert, []any{ev.ID}
}

func (e *pipelineEnv) round(evs ...txbox.Event) []string {
	e.t.Helper()
	ds := make([]broker.Delivery, len(evs))
	ss := make([]*settled, len(evs))
	for i, ev := range evs {
		ss[i] = &settled{ev: ev}
		ds[i] = ss[i]
	}
	e.c.HandleBatch(context.Background(), ds)
	out := make([]string, len(evs))
	for i, s := range ss {
		if s.times != 1 {
			e.t.Fatalf("event %d settled %d times", i, s.times)
		}
		out[i] = s.fate
	}
	return out
}

func (e *pipelineEnv) applied() map[string]int {
	e.t.Helper()
	return e.effects.Counts(e.t)
}

func events(n int) []txbox.Event {
	evs := make([]txbox.Event, n)
	for i := range evs {
		evs[i] = txbox.MustEvent("Order", "o-"+string(rune('a'+i)), "OrderCreated", nil)
	}
	return evs
}

func equal(a []string, b ...string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A statement that ran before but now fails before its batch runs, taking
// the savepoint with it, breaks the transaction before the event's
// savepoint exists: its arguments cannot be encoded (pgx then drops the
// connection), or it no longer parses (its table was dropped, and this
// connection had not prepared it yet). The whole transaction is given up
// and sent back, nothing of it committed; from then on the statement runs
// on its own, after the savepoint, and fails alone.
func TestPipelinedStatementBreaksBeforeItsSavepoint(t *testing.T) {
	for _, c := range []struct {
		name string
		stmt func(e *pipelineEnv, ev txbox.Event) (string, []any)
	}{
		{"bad arguments", func(e *pipelineEnv, ev txbox.Event) (string, []any) {
			return e.insertSQL(), []any{make(chan int)}
		}},
		{"no longer parses", func(e *pipelineEnv, ev txbox.Event) (string, []any) {
			return `INSERT INTO ` + e.effects.Table + `_gone (event_id) VALUES ($1)`, []any{ev.ID}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newPipelineEnv(t)
			evs := events(4)
			if got := e.round(evs[0]); !equal(got, "ack") { // the INSERT runs alone once: it is known now
				t.Fatalf("first round: %v", got)
			}
			bad, _ := c.stmt(e, evs[2])
			e.learn(bad) // as if it had run before
			e.stmt[evs[2].ID] = func() (string, []any) { return c.stmt(e, evs[2]) }
			if got := e.round(evs[1], evs[2], evs[3]); !equal(got, "nak", "nak", "nak") {
				t.Fatalf("fates %v, want all sent back", got)
			}
			if got := e.applied(); len(got) != 1 {
				t.Fatalf("effects of a transaction given up: %v", got)
			}
			if e.knows(bad) {
				t.Fatal("the statement still rides with savepoints")
			}
			if got := e.round(evs[1], evs[2], evs[3]); !equal(got, "ack", "nak", "ack") {
				t.Fatalf("fates %v, want ack nak ack", got)
			}
			got := e.applied()
			if len(got) != 3 || got[evs[0].ID] != 1 || got[evs[1].ID] != 1 || got[evs[3].ID] != 1 {
				t.Fatalf("effects %v", got)
			}
			var status string
			if err := e.s.Pool().QueryRow(context.Background(), `SELECT status FROM `+e.s.Tables().Inbox+` WHERE event_id = $1`, evs[2].ID).Scan(&status); err != nil || status != "RETRY" {
				t.Fatalf("failing event's row: %q %v", status, err)
			}
			delete(e.stmt, evs[2].ID)
			if got := e.round(evs[2]); !equal(got, "ack") {
				t.Fatalf("fixed: %v", got)
			}
		})
	}
}

// Savepoints ride with the handler's first statement only after a first
// batch; the handler's own nested transaction (pgx Begin) still works, and
// an error inside it rolls back only what it did.
func TestPipelinedHandlerNestedTransaction(t *testing.T) {
	e := newPipelineEnv(t)
	evs := events(3)
	e.round(evs[0])
	nestedFails := errors.New("nested part fails")
	c, err := New(e.s, e.c.cfg, func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
		q, args := e.insert(ev)
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
		err := pgx.BeginFunc(ctx, tx, func(nested pgx.Tx) error {
			if _, err := nested.Exec(ctx, q, ev.ID+"-nested"); err != nil {
				return err
			}
			if ev.ID == evs[1].ID {
				return nestedFails
			}
			return nil
		})
		if err != nil && !errors.Is(err, nestedFails) {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.learn(e.insertSQL())
	e.c = c
	if got := e.round(evs[1], evs[2]); !equal(got, "ack", "ack") {
		t.Fatalf("fates %v", got)
	}
	got := e.applied()
	if len(got) != 4 || got[evs[1].ID] != 1 || got[evs[2].ID] != 1 || got[evs[2].ID+"-nested"] != 1 || got[evs[1].ID+"-nested"] != 0 {
		t.Fatalf("effects %v", got)
	}
}

func (e *pipelineEnv) insertSQL() string {
	q, _ := e.insert(txbox.Event{})
	return q
}

// learn marks q as a statement that ran on its own before, in the store's
// set of statements a savepoint may ride with (pgxtx's test seam).
func (e *pipelineEnv) learn(q string) {
	e.seam(func(s sqlSeam) { s.LearnSQL(q) })
}

func (e *pipelineEnv) knows(q string) (ok bool) {
	e.seam(func(s sqlSeam) { ok = s.KnowsSQL(q) })
	return ok
}

type sqlSeam interface {
	LearnSQL(q string)
	KnowsSQL(q string) bool
}

func (e *pipelineEnv) seam(f func(sqlSeam)) {
	tx, err := e.s.BeginInbox(context.Background(), true)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	s, ok := tx.(sqlSeam)
	if !ok {
		e.t.Fatalf("%T has no LearnSQL/KnowsSQL", tx)
	}
	f(s)
}
