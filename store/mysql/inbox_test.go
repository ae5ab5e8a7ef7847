package mysql_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/storetest"
)

func migrated(t *testing.T, s store.Store) *mysql.Store {
	t.Helper()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s.(*mysql.Store)
}

// nonStrict is an application pool whose session would cut a too-long value
// and mangle bad UTF-8 instead of failing.
func nonStrict(t *testing.T) *mysql.Store {
	return migrated(t, newHarness{configure: func(cfg *mysqldrv.Config) {
		cfg.Params = map[string]string{"sql_mode": "'NO_ENGINE_SUBSTITUTION'"}
	}}.Open(t))
}

// An inbox key is never changed to fit: a value the column cannot keep
// exactly is an error, even where the session would store it cut.
func TestInboxRefusesWhatTheKeyCannotKeep(t *testing.T) {
	s := nonStrict(t)
	d := s.InboxDialect()
	ctx := context.Background()
	try := func(consumer string, e txbox.Event) (store.InboxState, error) {
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, _, err := d.InboxAcquire(ctx, store.SQLTx(tx), consumer, e)
		if err == nil {
			err = d.InboxDone(ctx, store.SQLTx(tx), consumer, e.ID, txbox.StatusProcessed, "")
		}
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		return st, err
	}
	base := txbox.MustEvent("Order", "o-1", "OrderPlaced", 1)
	long1, long2 := base, base
	long1.ID, long2.ID = strings.Repeat("x", 64)+"1", strings.Repeat("x", 64)+"2"
	if _, err := try("c", long1); err == nil {
		t.Fatalf("a 65-character event id was accepted")
	}
	if _, err := try("c", long2); err == nil {
		t.Fatalf("a 65-character event id was accepted")
	}
	bad := base
	bad.ID = "id-\xff"
	if _, err := try("c", bad); err == nil {
		t.Fatal("an event id that is not UTF-8 was accepted")
	}
	if _, err := try(strings.Repeat("c", 129), base); err == nil {
		t.Fatal("a 129-character consumer name was accepted")
	}
	// utf8mb4_bin ignores trailing spaces: "<id> " would be a duplicate of
	// "<id>". Refused rather than silently deduped.
	padded := base
	padded.ID = base.ID + " "
	if _, err := try("c", padded); err == nil {
		t.Fatal("an event id ending in a space was accepted")
	}
	// 64 characters of two bytes each fit: the limit is in characters.
	wide := base
	wide.ID = strings.Repeat("é", 64)
	if st, err := try("c", wide); err != nil || st != store.InboxFresh {
		t.Fatalf("64 two-byte characters: %v %v", st, err)
	}
	rows, err := s.InboxList(ctx, store.InboxFilter{})
	if err != nil || len(rows) != 1 || rows[0].EventID != wide.ID {
		t.Fatalf("rows: %v %+v", err, rows)
	}
	// A handler's error text is whatever the handler said: it is stored
	// made valid, and the failure is recorded.
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.InboxFail(ctx, store.SQLTx(tx), "c", base, "bad byte \xff here", 3, txbox.StatusRetry); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err = s.InboxList(ctx, store.InboxFilter{EventIDs: []string{base.ID}})
	if err != nil || len(rows) != 1 || rows[0].ErrorMessage != "bad byte \uFFFD here" {
		t.Fatalf("failure row: %v %+v", err, rows)
	}
}

// The stored event comes back whole, timestamps to the microsecond in UTC,
// and the received_at filter compares in UTC, on a pool with a non-UTC loc.
func TestInboxRoundTrip(t *testing.T) {
	s := migrated(t, newHarness{}.Open(t))
	ctx := context.Background()
	e := txbox.MustEvent("Order", "o-1", "OrderPlaced", map[string]int{"n": 1})
	e.OccurredAt = time.Date(2024, 2, 29, 12, 34, 56, 123456000, time.UTC)
	e.AggregateVersion = 9
	e.Headers = map[string]string{"traceparent": "00-abc-def-01", "x": "ü"}
	var us int64 // the database clock
	if err := s.DB().QueryRow(`SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))`).Scan(&us); err != nil {
		t.Fatal(err)
	}
	dbNow := time.UnixMicro(us)
	storetest.InTx(t, Harness{}, s, func(tx store.Tx) error {
		_, _, err := s.InboxDialect().InboxFail(ctx, tx, "c", e, "boom", 5, txbox.StatusRetry)
		return err
	})
	rows, err := s.InboxList(ctx, store.InboxFilter{Since: dbNow.Add(-time.Second), Until: dbNow.Add(time.Minute)})
	if err != nil || len(rows) != 1 {
		t.Fatalf("list: %v %d", err, len(rows))
	}
	got := rows[0]
	if !got.Event.OccurredAt.Equal(e.OccurredAt) || got.Event.OccurredAt.Location() != time.UTC || got.Event.AggregateVersion != 9 ||
		got.Event.Headers["x"] != "ü" || string(got.Event.Payload) != string(e.Payload) || got.ReceivedAt.Before(dbNow.Add(-time.Second)) || got.ProcessedAt != nil {
		t.Fatalf("row: %+v", got)
	}
	if rows, err := s.InboxList(ctx, store.InboxFilter{Until: dbNow.Add(-time.Minute)}); err != nil || len(rows) != 0 {
		t.Fatalf("until filter: %v %d", err, len(rows))
	}
}

// When a first delivery rolls back while several redeliveries wait for it,
// InnoDB may pick some of them as deadlock victims (its duplicate-check gap
// locks do that for any INSERT of a vanished row). What must hold: the event
// runs once; every other waiter finds it processed or fails retryably.
func TestInboxRollbackWithManyWaiters(t *testing.T) {
	s := migrated(t, Harness{}.Open(t))
	d := s.InboxDialect()
	ctx := context.Background()
	for round := range 3 {
		e := txbox.MustEvent("Order", "o-1", "OrderPlaced", round)
		first, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st, _, err := d.InboxAcquire(ctx, store.SQLTx(first), "c", e); err != nil || st != store.InboxFresh {
			t.Fatal(st, err)
		}
		const waiters = 4
		var mu sync.Mutex
		states := map[store.InboxState]int{}
		var wg sync.WaitGroup
		for range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				defer tx.Rollback()
				st, _, err := d.InboxAcquire(ctx, store.SQLTx(tx), "c", e)
				if err == nil && (st == store.InboxFresh || st == store.InboxRetry) {
					time.Sleep(50 * time.Millisecond)
					if err = d.InboxDone(ctx, store.SQLTx(tx), "c", e.ID, txbox.StatusProcessed, ""); err == nil {
						err = tx.Commit()
					}
				}
				var me *mysqldrv.MySQLError
				switch {
				case err == nil:
					mu.Lock()
					states[st]++
					mu.Unlock()
				case errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205):
				default:
					t.Errorf("waiter: %v", err)
				}
			}()
		}
		time.Sleep(200 * time.Millisecond)
		_ = first.Rollback()
		wg.Wait()
		if states[store.InboxFresh]+states[store.InboxRetry] != 1 {
			t.Fatalf("round %d: the event ran %d times (%v)", round, states[store.InboxFresh]+states[store.InboxRetry], states)
		}
		rows, err := s.InboxList(ctx, store.InboxFilter{EventIDs: []string{e.ID}})
		if err != nil || len(rows) != 1 || rows[0].Status != txbox.StatusProcessed {
			t.Fatalf("row: %v %+v", err, rows)
		}
	}
}
