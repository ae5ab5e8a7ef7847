package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// refuseMark makes the database refuse marking eventID sent, as a
// constraint or trigger an operator added would: a CHECK on the archive
// where there is one, else a trigger on the outbox table.
func refuseMark(t *testing.T, h Harness, s store.Store, eventID string) {
	t.Helper()
	tb := s.Tables()
	var q string
	switch s.Dialect().Name() {
	case "sqlite":
		q = fmt.Sprintf(`CREATE TRIGGER refuse_%s BEFORE UPDATE OF status ON %s WHEN NEW.status = 'SENT' AND OLD.event_id = '%s'
			BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`, tb.Outbox, tb.Outbox, eventID)
	default:
		q = fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT refuse_test CHECK (event_id <> '%s')`, tb.Qualified(tb.Outbox+"_sent"), eventID)
	}
	execSQL(t, h, s, q)
}

// testRefusedMark: a mark the database refuses for a row's own reason is
// reported as store.ErrRefused (so the relay can isolate the row instead
// of retrying the whole batch for ever) and changes nothing; the other rows
// can be marked on their own. A transaction claim that can isolate
// (claimapi.IsolatingClaim) marks every other row and records the refused one
// as failed.
func testRefusedMark(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	evs := []txbox.Event{ev("r1", 0), ev("r2", 0), ev("r3", 0), ev("r4", 0)}
	write(t, h, s, evs...)
	refuseMark(t, h, s, evs[1].ID)
	got := claim(t, s, "L", 10, time.Minute)
	if len(got) != 4 {
		t.Fatalf("claimed %d", len(got))
	}
	n, err := s.MarkSent(ctx, "L", ids(got))
	if !errors.Is(err, store.ErrRefused) || n != 0 {
		t.Fatalf("refused mark: %d, %v; want 0 and an error matching store.ErrRefused", n, err)
	}
	var others []int64
	for _, r := range got {
		if r.EventID != evs[1].ID {
			others = append(others, r.ID)
		}
	}
	mustMark(t, must(s.MarkSent(ctx, "L", others)), nil, 3, "the other rows")

	if _, ok := s.(claimapi.TxClaimer); !ok {
		return
	}
	s = open(t, h)
	evs = []txbox.Event{ev("t1", 0), ev("t2", 0), ev("t3", 0), ev("t4", 0), ev("t5", 0)}
	write(t, h, s, evs...)
	refuseMark(t, h, s, evs[2].ID)
	c := claimTx(t, s, 10)
	ic, ok := c.(claimapi.IsolatingClaim)
	if !ok {
		c.Abort()
		t.Fatalf("%T: transaction claims cannot isolate a refused mark", c)
	}
	var refused []int64
	err = ic.FinishIsolating(ctx, ids(c.Records()), nil, func(id int64, err error) store.Failure {
		refused = append(refused, id)
		return store.Failure{ID: id, Error: "refused: " + err.Error(), Delay: time.Hour}
	})
	if err != nil || len(refused) != 1 {
		t.Fatalf("FinishIsolating: %v, refused %v", err, refused)
	}
	st, _ := s.Stats(ctx)
	if st.Counts[txbox.StatusSent] != 4 || st.Counts[txbox.StatusRetry] != 1 {
		t.Fatalf("after isolating: %v", st.Counts)
	}
	recs, _ := s.List(ctx, store.Filter{EventIDs: []string{evs[2].ID}})
	if len(recs) != 1 || recs[0].ID != refused[0] || recs[0].RetryCount != 1 {
		t.Fatalf("refused row: %+v", recs)
	}
}
