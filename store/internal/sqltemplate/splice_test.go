package sqltemplate

import (
	"testing"
	"testing/fstest"
)

var spliceFiles = fstest.MapFS{
	"q/one.sql":  {Data: []byte("{{/* a comment */}}SELECT * FROM {{.Table}} WHERE id IN ({{.IDs}}) AND x = ?\n")},
	"q/two.sql":  {Data: []byte("UPDATE {{.Table}} SET n = n + 1 WHERE id IN ({{.IDs}}) OR parent IN ({{.IDs}})\n")},
	"q/none.sql": {Data: []byte("SELECT 1 FROM {{.Table}}\n")},
}

type spliceArgs struct{ Table, IDs string }

// TestSpliceEqualsRender: a spliced statement is, for any part, the text
// the template renders with that part, in each place it stands.
func TestSpliceEqualsRender(t *testing.T) {
	set := Must(spliceFiles, "q/*.sql", nil)
	for _, file := range []string{"one.sql", "two.sql"} {
		sp := set.Splice(file, spliceArgs{Table: "t", IDs: Hole})
		for _, part := range []string{"?", "?, ?", "$2, $3, $4", ""} {
			want := set.Render(file, spliceArgs{Table: "t", IDs: part})
			if got := sp.With(part); got != want {
				t.Errorf("%s with %q:\n got %q\nwant %q", file, part, got, want)
			}
		}
	}
}

func TestSpliceWithoutHolePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Splice of a statement without the hole did not panic")
		}
	}()
	Must(spliceFiles, "q/*.sql", nil).Splice("none.sql", spliceArgs{Table: "t", IDs: Hole})
}

// TestSpliceAllocs: With allocates the statement's text and nothing else;
// rendering the template per call allocated a dozen times.
func TestSpliceAllocs(t *testing.T) {
	sp := Must(spliceFiles, "q/*.sql", nil).Splice("two.sql", spliceArgs{Table: "t", IDs: Hole})
	if n := testing.AllocsPerRun(100, func() { _ = sp.With("?, ?, ?") }); n > 1 {
		t.Fatalf("With: %v allocations, want at most 1", n)
	}
}
