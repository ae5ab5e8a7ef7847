package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// One script of deliveries, in both modes, on every store and both kinds
// of transaction: first deliveries, a duplicate of an applied event, the
// same event twice in one batch, a failing event with a later event of its
// aggregate behind it, and an event coming back after a failed attempt.
func TestMixedBatchPostgresPgx(t *testing.T) { mixedBatch(t, storeenv.Postgres{}, true) }
func TestMixedBatchPostgresSQL(t *testing.T) { mixedBatch(t, storeenv.Postgres{}, false) }
func TestMixedBatchSQLite(t *testing.T)      { mixedBatch(t, storeenv.SQLite{}, false) }
func TestMixedBatchMariaDB(t *testing.T)     { mixedBatch(t, storeenv.MySQL{}, false) }

func mixedBatch(t *testing.T, h harness, usePgx bool) {
	for _, txBatch := range []int{1, 10} {
		t.Run(fmt.Sprintf("TxBatch%d", txBatch), func(t *testing.T) {
			s, db := openInboxStore(t, h)
			ctx := context.Background()
			effects := "effects_" + s.Tables().Outbox
			if _, err := db.ExecContext(ctx, `CREATE TABLE `+effects+` (event_id VARCHAR(64) NOT NULL PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+effects) })
			insert := `INSERT INTO ` + effects + ` (event_id) VALUES (?)`
			if s.Dialect().Name() == "postgres" {
				insert = strings.Replace(insert, "?", "$1", 1)
			}

			var mu sync.Mutex
			failOnce := map[string]bool{}
			// apply writes the effect, then fails if asked to: what it
			// wrote must be rolled back with it. A second application of
			// one event fails on the key and shows as a missing effect.
			apply := func(exec func(string, ...any) error, ev txbox.Event) error {
				if err := exec(insert, ev.ID); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if failOnce[ev.ID] {
					delete(failOnce, ev.ID)
					return errors.New("fails once")
				}
				return nil
			}
			cfg := inbox.Config{Name: "mixed", Subscriber: membroker.New(membroker.Options{}).Subscribe("mixed"),
				TxBatch: txBatch, MaxAttempts: 5, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Logger: quiet()}
			var c *inbox.Consumer
			var err error
			if usePgx {
				c, err = inbox.New(s.(*postgres.Store), cfg, func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
					return apply(func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err }, ev)
				})
			} else {
				c, err = inbox.New(storeOrSQL(t, s, db), cfg, func(ctx context.Context, tx *sql.Tx, ev txbox.Event) error {
					return apply(func(q string, args ...any) error { _, err := tx.ExecContext(ctx, q, args...); return err }, ev)
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			ev := map[string]txbox.Event{}
			for _, n := range []string{"a1", "a2", "b1", "c1", "d1", "e1"} {
				ev[n] = txbox.MustEvent("Order", "o-"+n[:1], "OrderCreated", nil)
			}
			round := func(names ...string) map[string]string {
				t.Helper()
				fs := make([]*fake, len(names))
				ds := make([]broker.Delivery, len(names))
				for i, n := range names {
					fs[i] = &fake{ev: ev[n]}
					ds[i] = fs[i]
				}
				c.HandleBatch(ctx, ds)
				out := map[string]string{}
				for i, n := range names {
					fate := "nak"
					switch {
					case fs[i].settled != 1:
						fate = fmt.Sprintf("settled %d times", fs[i].settled)
					case fs[i].acked:
						fate = "ack"
					}
					if prev, ok := out[n]; ok {
						fate = prev + "," + fate
					}
					out[n] = fate
				}
				return out
			}
			expect := func(got, want map[string]string) {
				t.Helper()
				for n, w := range want {
					if got[n] != w {
						t.Errorf("%s: %s, want %s (all: %v)", n, got[n], w, got)
					}
				}
			}
			applied := func(want ...string) {
				t.Helper()
				rows, err := db.QueryContext(ctx, `SELECT event_id FROM `+effects)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				names := map[string]string{}
				for n, e := range ev {
					names[e.ID] = n
				}
				var got []string
				for rows.Next() {
					var id string
					_ = rows.Scan(&id)
					got = append(got, names[id])
				}
				sort.Strings(got)
				sort.Strings(want)
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("effects of %v, want %v", got, want)
				}
			}
			row := func(n string) *store.InboxRow {
				t.Helper()
				rows, err := s.(store.InboxAdmin).InboxList(ctx, store.InboxFilter{Consumer: "mixed", EventIDs: []string{ev[n].ID}})
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) == 0 {
					return nil
				}
				return &rows[0]
			}

			failOnce[ev["e1"].ID] = true
			expect(round("d1", "e1"), map[string]string{"d1": "ack", "e1": "nak"})
			applied("d1")
			if r := row("e1"); r == nil || r.Status != txbox.StatusRetry || r.RetryCount != 1 {
				t.Fatalf("e1 after its failed attempt: %+v", r)
			}

			failOnce[ev["a1"].ID] = true
			expect(round("a1", "a2", "b1", "d1", "c1", "b1", "e1"), map[string]string{
				"a1": "nak", "a2": "nak", // a1 fails, a2 waits behind it
				"b1": "ack,ack", // applied, then a duplicate in the same batch
				"d1": "ack",     // a duplicate of an earlier batch
				"c1": "ack", "e1": "ack",
			})
			applied("b1", "c1", "d1", "e1")
			if r := row("a1"); r == nil || r.Status != txbox.StatusRetry || r.RetryCount != 1 || r.ErrorMessage != "fails once" {
				t.Fatalf("a1 after its failed attempt: %+v", r)
			}
			if r := row("a2"); r != nil {
				t.Fatalf("a2 was held back, yet it has a row: %+v", r)
			}
			if r := row("e1"); r == nil || r.Status != txbox.StatusProcessed || r.RetryCount != 1 || r.ProcessedAt == nil {
				t.Fatalf("e1 after its second attempt: %+v", r)
			}

			expect(round("a1", "a2"), map[string]string{"a1": "ack", "a2": "ack"})
			applied("a1", "a2", "b1", "c1", "d1", "e1")
			for n := range ev {
				if r := row(n); r == nil || r.Status != txbox.StatusProcessed || r.ProcessedAt == nil {
					t.Errorf("%s: %+v", n, r)
				}
			}
			ct := c.Stats()
			if ct.Processed != 6 || ct.Duplicates != 2 || ct.Failed != 2 {
				t.Errorf("processed %d duplicates %d failed %d, want 6, 2, 2", ct.Processed, ct.Duplicates, ct.Failed)
			}
		})
	}
}
