package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// TRUNCATE ... RESTART IDENTITY under a running relay hands out ids the
// archive already holds. Every row written after it must be delivered and
// marked (before: every marking transaction failed on the archive's key,
// and the relay republished the same batches twice a second for ever).
func TestRestartIdentityUnderRunningRelay(t *testing.T) {
	for _, c := range []struct {
		name, claims, truncate string
		open                   func(t *testing.T) store.Store
	}{
		{"postgres-tx", "auto", "TRUNCATE %s RESTART IDENTITY", func(t *testing.T) store.Store { return storeenv.Postgres{}.Open(t) }},
		{"postgres-lease", "lease", "TRUNCATE %s RESTART IDENTITY", func(t *testing.T) store.Store { return storeenv.Postgres{}.Open(t) }},
		{"mariadb", "auto", "TRUNCATE TABLE %s", func(t *testing.T) store.Store { return storeenv.MySQL{}.Open(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := c.open(t)
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			h := harness(c.name)
			b := membroker.New(membroker.Options{})
			r, _, _ := run(t, relay.Config{Store: s, Publisher: b, Claims: relay.ClaimMode(c.claims), BatchSize: 10})
			batch := func(round int) []txbox.Event {
				var evs []txbox.Event
				for i := range 20 {
					evs = append(evs, txbox.MustEvent("Order", fmt.Sprintf("o-%d", i%4), "E", map[string]int{"round": round, "i": i}))
				}
				return evs
			}
			writeStore(t, h, s, batch(1)...)
			testenv.WaitFor(t, 10*time.Second, "first 20 delivered", func() bool { return len(b.Messages()) >= 20 })
			testenv.WaitFor(t, 5*time.Second, "first 20 marked", func() bool {
				st, _ := s.Stats(ctx)
				return st.Counts[txbox.StatusSent] == 20
			})
			tx, commit, _ := h.Begin(t, s)
			if _, err := tx.Exec(ctx, fmt.Sprintf(c.truncate, s.Tables().Qualified(s.Tables().Outbox))); err != nil {
				t.Fatal(err)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			errsBefore := r.Stats().Errors
			writeStore(t, h, s, batch(2)...)
			testenv.WaitFor(t, 10*time.Second, "20 more delivered and marked", func() bool {
				st, _ := s.Stats(ctx)
				return st.Counts[txbox.StatusSent] == 40
			})
			if n := len(b.Messages()); n != 40 {
				t.Fatalf("%d messages published for 40 events", n)
			}
			if d := r.Stats().Errors - errsBefore; d != 0 {
				t.Fatalf("%d batch errors after the truncate", d)
			}
		})
	}
}

type txHarness interface {
	Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error)
}

func harness(name string) txHarness {
	if name == "mariadb" {
		return storeenv.MySQL{}
	}
	return storeenv.Postgres{}
}

func writeStore(t *testing.T, h txHarness, s store.Store, evs ...txbox.Event) {
	t.Helper()
	tx, commit, rollback := h.Begin(t, s)
	if err := outbox.NewWriter(s.Dialect()).Add(context.Background(), tx, evs...); err != nil {
		_ = rollback()
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
}
