package scenario

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// InboxDuplicateDeliveries: one event is delivered five times (the relay
// republishes it four times, as after crashes between the broker's ack and
// the mark); the consumer's business table changes once and the duplicate
// counter reads 4.
func InboxDuplicateDeliveries(t *testing.T, st Store, br Broker) {
	d := br.Setup(t)
	if d.Subscriber == nil {
		t.Skip("broker harness has no subscriber")
	}
	s := migrated(t, st)
	withAdmin, ok := s.(interface {
		store.Store
		store.InboxAdmin
		InboxDialect() store.InboxDialect
	})
	if !ok {
		t.Fatalf("%T has no inbox support", s)
	}
	db := st.SQLDB(t, s)
	// The handler is portable SQL on a *sql.Tx, whatever the store.
	is, err := store.SQLInbox(db, withAdmin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	effects := storeenv.NewEffects(t, s, db).Table

	ev := txbox.MustEvent("Order", "o-1", "OrderCreated", map[string]int{"qty": 2})
	write(t, st, s, 10, []txbox.Event{ev})
	// Four relays "crash" between the broker's ack and the SENT mark: each
	// claims the row, publishes it and never marks it; when its lease has
	// expired (and the broker's duplicate window has passed) the next one
	// takes the row over. A live relay then publishes the fifth copy.
	pub := d.Publisher(t)
	topic := broker.Topic(d.Topic)
	for copies := 1; copies <= 4; copies++ {
		recs, err := s.Claim(ctx, store.ClaimRequest{Lease: fmt.Sprintf("crashed-%d", copies), Limit: 10, LeaseFor: 200 * time.Millisecond})
		if err != nil || len(recs) != 1 {
			t.Fatalf("claim #%d: %v (%d rows)", copies, err, len(recs))
		}
		e, err := recs[0].Event()
		if err != nil {
			t.Fatal(err)
		}
		if errs := pub.Publish(ctx, []broker.Message{{Event: e, Topic: topic.Render(e), Source: "txbox"}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		waitCount(t, d, copies, 15*time.Second)
		time.Sleep(max(d.DedupeWindow, 200*time.Millisecond) + 100*time.Millisecond)
	}
	inProcess(t, st, s, d, relay.Config{})
	waitCount(t, d, 5, 15*time.Second)
	waitStatus(t, s, ev.ID, txbox.StatusSent, 10*time.Second)

	c, err := inbox.New(is, inbox.Config{Name: "inventory", Subscriber: d.Subscriber(t, "inventory"),
		BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond},
		func(ctx context.Context, tx *sql.Tx, e txbox.Event) error {
			// Portable "apply once more": a second application shows as n = 2.
			res, err := tx.ExecContext(ctx, `UPDATE `+effects+` SET n = n + 1 WHERE event_id = '`+e.ID+`'`)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				_, err = tx.ExecContext(ctx, `INSERT INTO `+effects+` (event_id, n) VALUES ('`+e.ID+`', 1)`)
			}
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.Go(t, c.Run)
	defer stop()
	deadline := time.Now().Add(20 * time.Second)
	for c.Stats().Processed+c.Stats().Duplicates < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries: processed %d duplicates %d, want 5 in all", c.Stats().Processed, c.Stats().Duplicates)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT n FROM `+effects+` WHERE event_id = '`+ev.ID+`'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("business table: n = %d (%v), want the event applied once", n, err)
	}
	if got := c.Stats().Duplicates; got != 4 {
		t.Fatalf("duplicate counter %d, want 4", got)
	}
}

func waitCount(t *testing.T, d *Destination, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for len(d.Stored(t)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("broker holds %d copies, want %d", len(d.Stored(t)), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := len(d.Stored(t)); got != n {
		t.Fatalf("broker holds %d copies, want exactly %d", got, n)
	}
}
