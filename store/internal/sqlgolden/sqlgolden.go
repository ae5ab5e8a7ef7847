// Package sqlgolden checks the SQL a store generates against golden files,
// so that every change to a statement shows in a diff of testdata/.
//
// A store's golden test lists its statements for each set of options that
// changes them (Cases) and calls Run: the statements it keeps in a struct
// (Fields) and those it renders per call, with Filter, InboxFilter and the
// shared inbox statements (Inbox). Run it with -update to rewrite the files
// after a deliberate change:
//
//	go test ./store/postgres -run TestSQLGolden -update
package sqlgolden

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the SQL golden files (testdata/*.golden)")

const header = "-- name: "

// Statement is one generated statement and the name it is printed under.
type Statement struct {
	Name string
	SQL  string
}

// Run checks, for each case, the statements that statements returns for its
// options against testdata/<case>.golden (Check), in the order of the
// names.
func Run[O any](t *testing.T, cases map[string]O, statements func(O) ([]Statement, error)) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		t.Run(name, func(t *testing.T) {
			stmts, err := statements(cases[name])
			if err != nil {
				t.Fatal(err)
			}
			Check(t, name, stmts)
		})
	}
}

// Check prints stmts, each under a "-- name: <Name>" line, and compares the text
// with testdata/<file>.golden, or writes that file with -update.
func Check(t testing.TB, file string, stmts []Statement) {
	t.Helper()
	var b strings.Builder
	for _, s := range stmts {
		fmt.Fprintf(&b, "%s%s\n%s\n\n", header, s.Name, s.SQL)
	}
	got := b.String()
	path := filepath.Join("testdata", file+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got == string(want) {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	stmt := ""
	for i := 0; i < max(len(g), len(w)); i++ {
		gl, wl := line(g, i), line(w, i)
		if name, ok := strings.CutPrefix(wl, header); ok {
			stmt = name
		}
		if gl != wl {
			t.Errorf("%s: generated SQL differs from the golden file in statement %q, line %d:\n got: %q\nwant: %q\n(run with -update if the change is meant)", path, stmt, i+1, gl, wl)
			return
		}
	}
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end of text>"
}
