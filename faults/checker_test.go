package faults

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store/postgres"
)

// TestCheckerSeesAnEventDeletedFromTheOutbox records a run in which one
// committed event is deleted from the outbox before any relay saw it (a
// writer that dropped it, a relay that deleted it instead of archiving it)
// and one event reaches the outbox without being committed by a producer:
// the checker, reading "committed" from the producers' ledger, must report
// exactly that event lost, in no outbox table, and the other one phantom.
// A checker that took "committed" from the outbox tables sees neither.
func TestCheckerSeesAnEventDeletedFromTheOutbox(t *testing.T) {
	w := NewWorldOn(t, testenv.Binary(t), NewPostgres(t, false), NewNATS(t))
	pg := w.Postgres()
	ctx := context.Background()
	pctx, stop := context.WithTimeout(ctx, 2*time.Second)
	prod := Produce(pctx, w, 2, 200, 17, 0.1)
	prod.Wait()
	stop()

	// The last version of its aggregate, so that no later event waits for
	// it at the Ordered consumer.
	var lostID string
	if err := pg.Prod.QueryRow(ctx, `SELECT l.event_id FROM ledger l WHERE l.aggregate_id LIKE 'order-%'
		AND l.version = (SELECT max(version) FROM ledger m WHERE m.aggregate_id = l.aggregate_id)
		ORDER BY l.event_id LIMIT 1`).Scan(&lostID); err != nil {
		t.Fatal(err)
	}
	if tag, err := pg.Prod.Exec(ctx, `DELETE FROM outbox_event WHERE event_id = $1`, lostID); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete %s: %v, %d rows", lostID, err, tag.RowsAffected())
	}
	phantom := txbox.MustEvent("Order", "phantom-1", "OrderChanged", map[string]any{"order": "phantom-1"})
	phantom.AggregateVersion = 1
	writer := outbox.NewWriter(postgres.Dialect{Tables: pg.Tables})
	if err := pgx.BeginFunc(ctx, pg.Prod, func(tx pgx.Tx) error { return pgxtx.Add(ctx, tx, writer, phantom) }); err != nil {
		t.Fatal(err)
	}

	for i := range w.Relays() {
		w.StartRelay(i)
	}
	for i := range Consumers {
		w.StartConsumer(i)
	}
	rep := drainAndCheck(t, w, prod, time.Minute, 0)
	t.Logf("report:\n%s", rep)
	if rep.Committed < 100 {
		t.Fatalf("only %d events committed", rep.Committed)
	}
	if rep.Lost != 1 || rep.LostNotInOutbox != 1 || rep.Stuck != 0 || len(rep.LostIDs) != 1 || rep.LostIDs[0] != lostID {
		t.Errorf("lost %d (in no outbox table %d, stuck %d) %v, want exactly %s, in no outbox table", rep.Lost, rep.LostNotInOutbox, rep.Stuck, rep.LostIDs, lostID)
	}
	if rep.Phantom != 1 {
		t.Errorf("phantom %d, want 1 (%s)", rep.Phantom, phantom.ID)
	}
	for _, c := range rep.Consumers {
		// Each consumer applied all but the lost one, plus the phantom.
		if c.Applied != rep.Committed || c.Lost != 1 || c.NotInStream != 1 {
			t.Errorf("%s applied %d of %d committed, lost %d (%d never in the stream), want all but %s, plus the phantom",
				c.Name, c.Applied, rep.Committed, c.Lost, c.NotInStream, lostID)
		}
	}
	if rep.DoubleEffects != 0 || rep.ConsumerReorders != 0 || rep.PublishReorders != 0 || rep.SentNotInStream != 0 || rep.UnappliedInStream != 0 {
		t.Errorf("double %d, reorders %d/%d, SENT not in stream %d, in stream not applied %d, want none",
			rep.DoubleEffects, rep.ConsumerReorders, rep.PublishReorders, rep.SentNotInStream, rep.UnappliedInStream)
	}
}
