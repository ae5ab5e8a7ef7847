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
	for _, c := range backends() {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := c.open(t)
			evs := testenv.Backlog(12, 3, "E")
			bad := evs[4].ID
			refuse := checkOnArchive
			if c.name == "sqlite" {
				refuse = sqliteTrigger
			}
			c.exec(t, s, refuse(s, bad))
			storeenv.Write(t, c.h, s, evs...)
			b := membroker.New(membroker.Options{})
			r, _, _ := run(t, relay.Config{Store: s, Publisher: b, Claims: c.claims, MaxAttempts: 3,
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

// TRUNCATE ... RESTART IDENTITY under a running relay hands out ids the
// archive already holds. Every row written after it must be delivered and
// marked (before: every marking transaction failed on the archive's key,
// and the relay republished the same batches twice a second for ever).
func TestRestartIdentityUnderRunningRelay(t *testing.T) {
	for _, c := range backends() {
		if c.name == "sqlite" {
			continue // SQLite has no TRUNCATE
		}
		t.Run(c.name, func(t *testing.T) {
			s := c.open(t)
			b := membroker.New(membroker.Options{})
			r, _, _ := run(t, relay.Config{Store: s, Publisher: b, Claims: c.claims, BatchSize: 10})
			batch := func(round int) []txbox.Event {
				var evs []txbox.Event
				for i := range 20 {
					evs = append(evs, txbox.MustEvent("Order", fmt.Sprintf("o-%d", i%4), "E", map[string]int{"round": round, "i": i}))
				}
				return evs
			}
			storeenv.Write(t, c.h, s, batch(1)...)
			testenv.WaitFor(t, time.Minute, "first 20 delivered", func() bool { return len(b.Messages()) >= 20 })
			waitSent(t, s, 20, 5*time.Second, "first 20 marked")
			truncate := "TRUNCATE %s RESTART IDENTITY"
			if c.name == "mariadb" {
				truncate = "TRUNCATE TABLE %s"
			}
			c.exec(t, s, fmt.Sprintf(truncate, s.Tables().Qualified(s.Tables().Outbox)))
			errsBefore := r.Stats().Errors
			storeenv.Write(t, c.h, s, batch(2)...)
			waitSent(t, s, 40, 10*time.Second, "20 more delivered and marked")
			if n := len(b.Messages()); n != 40 {
				t.Fatalf("%d messages published for 40 events", n)
			}
			if d := r.Stats().Errors - errsBefore; d != 0 {
				t.Fatalf("%d batch errors after the truncate", d)
			}
		})
	}
}

// checkOnArchive refuses the archiving of one event, as a constraint an
// operator added to the archive would.
func checkOnArchive(s store.Store, eventID string) string {
	return fmt.Sprintf(`ALTER TABLE %s_sent ADD CONSTRAINT refuse_test CHECK (event_id <> '%s')`, s.Tables().Qualified(s.Tables().Outbox), eventID)
}

// sqliteTrigger refuses the marking of one event, SQLite having no ALTER
// TABLE ... ADD CONSTRAINT.
func sqliteTrigger(s store.Store, eventID string) string {
	return fmt.Sprintf(`CREATE TRIGGER refuse_test BEFORE UPDATE OF status ON %s WHEN NEW.status = 'SENT' AND OLD.event_id = '%s'
		BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`, s.Tables().Outbox, eventID)
}
