package storetest

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// badBytes is an error text as a broker or a handler may produce it when it
// quotes hostile data: invalid UTF-8, a NUL byte, and a multi-byte character
// where the 2000-byte cut falls.
var badBytes = "refused \xff\xfe payload with \x00 inside: " + strings.Repeat("é", 1500)

func checkStoredText(t *testing.T, what, got string) {
	t.Helper()
	if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 || len(got) > 2000 || !strings.HasPrefix(got, "refused") {
		t.Fatalf("%s stored as %q (%d bytes): want valid UTF-8 without NUL, at most 2000 bytes", what, sqlstore.Truncate(got, 80), len(got))
	}
}

// testBadBytesInLastError: a failure whose text holds bytes the database
// cannot store as text still marks its row. Were the whole MarkFailed
// statement refused (PostgreSQL refuses such text), the batch's rows would
// never be marked and would come back after every lease, forever.
func testBadBytesInLastError(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	write(t, h, s, ev("a", 1), ev("b", 1))
	got := claim(t, s, "L", 10, time.Minute)
	n, err := s.MarkFailed(ctx, "L", []store.Failure{
		{ID: got[0].ID, Error: badBytes, Dead: true},
		{ID: got[1].ID, Error: badBytes, Delay: time.Hour},
	})
	mustMark(t, n, err, 2, "mark failed with bad bytes in the error")
	for _, st := range []txbox.Status{txbox.StatusDead, txbox.StatusRetry} {
		recs, err := s.List(ctx, store.Filter{Status: st})
		if err != nil || len(recs) != 1 {
			t.Fatalf("list %s: %v, %d rows", st, err, len(recs))
		}
		checkStoredText(t, "last_error", recs[0].LastError)
	}
}

// testInboxBadBytesInError: a handler error quoting bad bytes is recorded,
// so the attempt counts and the event is parked in the end instead of being
// redelivered forever.
func testInboxBadBytesInError(t *testing.T, h Harness, d store.InboxDialect, a store.InboxAdmin, s store.Store) {
	e := ev("a", 1)
	var parked bool
	InTx(t, h, s, func(tx store.Tx) error {
		var err error
		_, parked, err = d.InboxFail(context.Background(), tx, "c1", e, badBytes, 1, txbox.StatusRetry)
		return err
	})
	r := row(t, a, "c1", e.ID)
	if !parked || r.Status != txbox.StatusDead {
		t.Fatalf("parked %v, row %+v", parked, r)
	}
	checkStoredText(t, "error_message", r.ErrorMessage)
}
