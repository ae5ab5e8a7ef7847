package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// A mark the database refuses for one row (here a constraint an operator
// added) is isolated: the rest of the batch is marked, the refused row goes
// to RETRY with a last_error that says why, counts as an attempt, and goes
// DEAD after MaxAttempts. Before: the whole batch was refused, published
// again and refused again, for ever, and nothing reached RETRY or DEAD.
func TestRefusedMarkIsIsolated(t *testing.T) {
	for _, c := range []struct {
		name, claims string
		h            txHarness
		open         func(t *testing.T) store.Store
		refuse       func(s store.Store, eventID string) string
	}{
		{"postgres-tx", "auto", storeenv.Postgres{}, func(t *testing.T) store.Store { return storeenv.Postgres{}.Open(t) }, checkOnArchive},
		{"postgres-lease", "lease", storeenv.Postgres{}, func(t *testing.T) store.Store { return storeenv.Postgres{}.Open(t) }, checkOnArchive},
		{"mariadb", "auto", storeenv.MySQL{}, func(t *testing.T) store.Store { return storeenv.MySQL{}.Open(t) }, checkOnArchive},
		{"sqlite", "auto", storeenv.SQLite{}, func(t *testing.T) store.Store { return storeenv.SQLite{}.Open(t) }, func(s store.Store, id string) string {
			return fmt.Sprintf(`CREATE TRIGGER refuse_test BEFORE UPDATE OF status ON %s WHEN NEW.status = 'SENT' AND OLD.event_id = '%s'
				BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`, s.Tables().Outbox, id)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := c.open(t)
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			var evs []txbox.Event
			for i := range 12 {
				evs = append(evs, txbox.MustEvent("Order", fmt.Sprintf("o-%d", i%3), "E", map[string]int{"i": i}))
			}
			bad := evs[4].ID
			tx, commit, _ := c.h.Begin(t, s)
			if _, err := tx.Exec(ctx, c.refuse(s, bad)); err != nil {
				t.Fatal(err)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			writeStore(t, c.h, s, evs...)
			b := membroker.New(membroker.Options{})
			r, _, _ := run(t, relay.Config{Store: s, Publisher: b, Claims: relay.ClaimMode(c.claims), MaxAttempts: 3,
				BackoffBase: 20 * time.Millisecond, BackoffMax: 40 * time.Millisecond})
			testenv.WaitFor(t, 15*time.Second, "11 sent and the refused row DEAD", func() bool {
				st, _ := s.Stats(ctx)
				return st.Counts[txbox.StatusSent] == 11 && st.Counts[txbox.StatusDead] == 1
			})
			recs, err := s.List(ctx, store.Filter{EventIDs: []string{bad}})
			if err != nil || len(recs) != 1 {
				t.Fatalf("%v %v", recs, err)
			}
			if rec := recs[0]; rec.RetryCount != 3 || !strings.Contains(rec.LastError, "gave up after 3 attempts: published, but marking it sent failed") {
				t.Fatalf("refused row: retry_count %d, last_error %q", rec.RetryCount, rec.LastError)
			}
			published := 0
			for _, m := range b.Messages() {
				if m.Event.ID == bad {
					published++
				}
			}
			if published != 3 {
				t.Fatalf("the refused row was published %d times, want once per attempt (3)", published)
			}
			if n := r.Stats().Errors; n != 0 {
				t.Fatalf("%d batch errors", n)
			}
		})
	}
}

// checkOnArchive refuses the archiving of one event, as a constraint an
// operator added to the archive would.
func checkOnArchive(s store.Store, eventID string) string {
	return fmt.Sprintf(`ALTER TABLE %s_sent ADD CONSTRAINT refuse_test CHECK (event_id <> '%s')`, s.Tables().Qualified(s.Tables().Outbox), eventID)
}
