package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// testKeysetCount: the admin console pages dead rows by id (AfterID,
// BeforeID, Desc), filters on the error text, shows Count before a bulk
// action, and bounds the action by the highest id it counted.
func testKeysetCount(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxT(t)
	errs := []string{"boom: 50% off", "Boom_x", "timeout", "TIMEOUT again", "other", "boomxx"}
	var events []txbox.Event
	for i := range errs {
		events = append(events, ev(fmt.Sprintf("k%d", i), 1))
	}
	write(t, h, s, events...)
	// One row is delivered: Count, like List, reads the archive of SENT
	// rows where the store has one.
	write(t, h, s, ev("sent", 1))
	got := claim(t, s, "L", len(errs), time.Minute)
	if len(got) != len(errs) {
		t.Fatalf("claimed %d rows, want %d", len(got), len(errs))
	}
	var fs []store.Failure
	for i, r := range got {
		fs = append(fs, store.Failure{ID: r.ID, Error: errs[i], Dead: true})
	}
	n, err := s.MarkFailed(ctx, "L", fs)
	mustMark(t, n, err, int64(len(errs)), "dead")

	sent := claim(t, s, "S", 1, time.Minute)
	if len(sent) != 1 {
		t.Fatalf("claimed %d rows, want the one left", len(sent))
	}
	n, err = s.MarkSent(ctx, "S", ids(sent))
	mustMark(t, n, err, 1, "sent")

	dead := store.Filter{Status: txbox.StatusDead}
	all, err := s.List(ctx, dead)
	if err != nil || len(all) != len(errs) {
		t.Fatalf("list: %v, %d rows", err, len(all))
	}
	asc := ids(all)
	if !slices.IsSorted(asc) {
		t.Fatalf("List without Desc must be in id order: %v", asc)
	}

	page := func(f store.Filter) []int64 {
		t.Helper()
		recs, err := s.List(ctx, f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		return ids(recs)
	}
	f := dead
	f.Limit = 2
	f.AfterID = asc[1]
	if got := page(f); !slices.Equal(got, asc[2:4]) {
		t.Fatalf("AfterID page: %v, want %v", got, asc[2:4])
	}
	f = dead
	f.Limit, f.Desc, f.BeforeID = 2, true, asc[4]
	if got := page(f); !slices.Equal(got, []int64{asc[3], asc[2]}) {
		t.Fatalf("Desc BeforeID page: %v, want %v", got, []int64{asc[3], asc[2]})
	}
	f = dead
	f.Desc = true
	if got := page(f); got[0] != asc[len(asc)-1] {
		t.Fatalf("Desc must start at the highest id: %v", got)
	}

	for _, c := range []struct {
		text string
		want []string
	}{
		{"boom", []string{"boom: 50% off", "Boom_x", "boomxx"}},
		{"TIMEOUT", []string{"timeout", "TIMEOUT again"}},
		// LIKE wildcards in the text are literal.
		{"50%", []string{"boom: 50% off"}},
		{"m_x", []string{"Boom_x"}},
		{"nothing", nil},
	} {
		f := dead
		f.ErrorContains = c.text
		recs, err := s.List(ctx, f)
		if err != nil {
			t.Fatalf("list ErrorContains %q: %v", c.text, err)
		}
		var gotErrs []string
		for _, r := range recs {
			gotErrs = append(gotErrs, r.LastError)
		}
		if !slices.Equal(gotErrs, c.want) {
			t.Fatalf("ErrorContains %q: %q, want %q", c.text, gotErrs, c.want)
		}
		if n, err := s.Count(ctx, f); err != nil || n != int64(len(c.want)) {
			t.Fatalf("Count ErrorContains %q: %d %v, want %d", c.text, n, err, len(c.want))
		}
	}

	for _, c := range []struct {
		f    store.Filter
		want int64
	}{
		{store.Filter{}, int64(len(errs)) + 1},
		{dead, int64(len(errs))},
		{store.Filter{Status: txbox.StatusSent}, 1},
		{store.Filter{Status: txbox.StatusPending}, 0},
		{store.Filter{Status: txbox.StatusDead, AfterID: asc[0], BeforeID: asc[3]}, 2},
		{store.Filter{Status: txbox.StatusDead, AggregateID: "k2"}, 1},
	} {
		if n, err := s.Count(ctx, c.f); err != nil || n != c.want {
			t.Fatalf("Count %+v: %d %v, want %d", c.f, n, err, c.want)
		}
	}

	// A bulk action bounded by the highest id counted leaves rows that
	// died after the count alone.
	bounded := store.Filter{Status: txbox.StatusDead, ErrorContains: "boom", BeforeID: asc[4] + 1}
	if n, err := s.Count(ctx, bounded); err != nil || n != 2 {
		t.Fatalf("bounded count: %d %v, want 2", n, err)
	}
	n, err = s.Replay(ctx, bounded)
	mustMark(t, n, err, 2, "bounded replay")
	n, err = s.Purge(ctx, store.Filter{ErrorContains: "boom", AfterID: asc[4]})
	mustMark(t, n, err, 1, "bounded purge")
	if n, err := s.Count(ctx, dead); err != nil || n != 3 {
		t.Fatalf("dead left: %d %v, want 3", n, err)
	}
}
