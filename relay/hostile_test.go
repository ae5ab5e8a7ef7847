package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// A broker error that quotes hostile bytes (invalid UTF-8, NUL) still gets
// its row marked: DEAD for a permanent error, RETRY and then SENT for a
// passing one. Before sqlstore.Truncate made last_error storable, PostgreSQL
// refused the whole MarkFailed statement, the relay counted a store error,
// and the row came back after every lease without ever spending an attempt.
func TestBrokerErrorWithBadBytesStillMarks(t *testing.T) {
	s := openPG(t)
	b := membroker.New(membroker.Options{})
	ctx := context.Background()
	poison := txbox.MustEvent("Order", "a", "E", nil)
	write(t, s, poison)
	b.FailNext(1, txbox.Permanent(errors.New("broker says \xff\xfe\x00 is not allowed")))
	r, _, _ := run(t, relay.Config{Store: s, Publisher: b, MaxAttempts: 5, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	testenv.WaitFor(t, time.Minute, "poison row DEAD", func() bool {
		recs, _ := s.List(ctx, store.Filter{EventIDs: []string{poison.ID}})
		return len(recs) == 1 && recs[0].Status == txbox.StatusDead
	})

	flaky := txbox.MustEvent("Order", "b", "E", nil)
	b.FailNext(1, errors.New("flaky \xfe\x00 broker"))
	write(t, s, flaky)
	testenv.WaitFor(t, time.Minute, "flaky row SENT", func() bool {
		recs, _ := s.List(ctx, store.Filter{EventIDs: []string{flaky.ID}})
		return len(recs) == 1 && recs[0].Status == txbox.StatusSent
	})
	recs, err := s.List(ctx, store.Filter{EventIDs: []string{poison.ID, flaky.ID}})
	if err != nil || len(recs) != 2 {
		t.Fatalf("list: %v, %d rows", err, len(recs))
	}
	for _, rec := range recs {
		if !utf8.ValidString(rec.LastError) || strings.IndexByte(rec.LastError, 0) >= 0 || !strings.Contains(rec.LastError, "broker") {
			t.Errorf("event %s: last_error %q", rec.EventID, rec.LastError)
		}
	}
	if recs[0].Status != txbox.StatusDead || recs[0].RetryCount != 1 || recs[1].RetryCount != 1 {
		t.Errorf("rows: %+v", recs)
	}
	if c := r.Stats(); c.Errors != 0 || c.Dead != 1 || c.Retried != 1 {
		t.Errorf("relay counters: errors %d, dead %d, retried %d; want 0, 1, 1", c.Errors, c.Dead, c.Retried)
	}
}
