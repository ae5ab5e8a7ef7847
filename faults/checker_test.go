package faults

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
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
	w := NewWorld(t, testenv.Binary(t))
	ctx := context.Background()
	pctx, stop := context.WithTimeout(ctx, 2*time.Second)
	prod := Produce(pctx, w, 2, 200, 17, 0.1)
	prod.Wait()
	stop()

	// The last version of its aggregate, so that no later event waits for
	// it at the Ordered consumer.
	var lostID string
	if err := w.Prod.QueryRow(ctx, `SELECT l.event_id FROM ledger l WHERE l.aggregate_id LIKE 'order-%'
		AND l.version = (SELECT max(version) FROM ledger m WHERE m.aggregate_id = l.aggregate_id)
		ORDER BY l.event_id LIMIT 1`).Scan(&lostID); err != nil {
		t.Fatal(err)
	}
	if tag, err := w.Prod.Exec(ctx, `DELETE FROM outbox_event WHERE event_id = $1`, lostID); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete %s: %v, %d rows", lostID, err, tag.RowsAffected())
	}
	phantom := txbox.MustEvent("Order", "phantom-1", "OrderChanged", map[string]any{"order": "phantom-1"})
	phantom.AggregateVersion = 1
	writer := outbox.NewWriter(postgres.Dialect{Tables: w.Tables})
	if err := pgx.BeginFunc(ctx, w.Prod, func(tx pgx.Tx) error { return writer.AddPgx(ctx, tx, phantom) }); err != nil {
		t.Fatal(err)
	}

	for i := range w.Relays() {
		w.StartRelay(i)
	}
	for i := range 2 {
		w.StartConsumer(i)
	}
	rep := drainAndCheck(t, w, prod, time.Minute)
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
	if rep.Applied != rep.Committed || rep.DoubleEffects != 0 || rep.ConsumerReorders != 0 || rep.PublishReorders != 0 {
		t.Errorf("applied %d of %d committed (want all but the lost one plus the phantom), double %d, reorders %d/%d",
			rep.Applied, rep.Committed, rep.DoubleEffects, rep.ConsumerReorders, rep.PublishReorders)
	}
}
