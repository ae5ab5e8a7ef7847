package mysql

import (
	"strings"
	"testing"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// idStatement is a statement on an id list and the file it is spliced
// from.
type idStatement struct {
	file string
	sql  sqltemplate.Spliced
}

// idStatements are the statements of q that take an id list.
func idStatements(q queries) []idStatement {
	return []idStatement{
		{"lock.sql", q.lock}, {"lease.sql", q.lease},
		{"mark_sent_delete.sql", q.markSentDelete}, {"mark_sent_lock.sql", q.markSentLock},
		{"mark_sent_archive.sql", q.markSentArchive}, {"mark_sent_remove.sql", q.markSentRemove},
		{"release.sql", q.release},
	}
}

// TestIDStatementsSplicedAsRendered: each statement on an id list, spliced
// with the placeholders of 1, 2 and 500 ids, is the text its template
// renders with them, for the default and qualified table names.
func TestIDStatementsSplicedAsRendered(t *testing.T) {
	for _, tables := range []store.Tables{{}, {Schema: "app", Outbox: "ob", Inbox: "ib"}} {
		s, err := New(nil, Options{Tables: tables})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 500} {
			in, _ := inList(make([]int64, n), nil)
			a := s.q.args
			a.IDs = in
			for _, st := range idStatements(s.q) {
				got, want := st.sql.With(in), queryTemplates.Render(st.file, a)
				if got != want {
					t.Errorf("%+v: %s with %d ids:\n got %q\nwant %q", tables, st.file, n, got, want)
				}
				if strings.Contains(got, sqltemplate.Hole) {
					t.Errorf("%s: the hole is left in %q", st.file, got)
				}
			}
		}
	}
}

// TestIDStatementAllocs: a statement on an id list costs the relay one
// allocation, its text (rendering the template per call took a dozen).
func TestIDStatementAllocs(t *testing.T) {
	s, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := inList([]int64{1, 2, 3, 4, 5, 6, 7, 8}, nil)
	if n := testing.AllocsPerRun(200, func() { _ = s.q.lock.With(in) }); n > 1 {
		t.Fatalf("lock.sql for 8 ids: %v allocations, want at most 1", n)
	}
}

// BenchmarkIDStatement compares splicing an id list into lock.sql with
// rendering its template per call.
func BenchmarkIDStatement(b *testing.B) {
	s, err := New(nil, Options{})
	if err != nil {
		b.Fatal(err)
	}
	in, _ := inList(make([]int64, 100), nil)
	b.Run("splice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.q.lock.With(in)
		}
	})
	b.Run("render", func(b *testing.B) {
		b.ReportAllocs()
		a := s.q.args
		a.IDs = in
		for b.Loop() {
			_ = queryTemplates.Render("lock.sql", a)
		}
	})
}
