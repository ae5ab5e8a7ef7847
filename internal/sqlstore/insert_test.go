package sqlstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

type execRecord struct {
	query string
	args  []any
}

// recordTx records every Exec; QueryRow is not used by inserts.
type recordTx struct {
	execs []execRecord
	fail  error
}

func (t *recordTx) Exec(_ context.Context, q string, args ...any) (int64, error) {
	t.execs = append(t.execs, execRecord{q, args})
	return int64(len(args)), t.fail
}

func (t *recordTx) QueryRow(context.Context, string, ...any) store.Row { panic("unused") }

func dollar(i int) string { return "$" + strconv.Itoa(i) }

// TestPreparedInsertText: the statement for n rows numbers its
// placeholders 1..n*cols, whether its text was built at construction (up to
// 8 rows) or per call; more than chunk rows take several statements.
func TestPreparedInsertText(t *testing.T) {
	p := sqlstore.NewPreparedInsert("s.t", []string{"a", "b"}, 10, dollar)
	for _, tc := range []struct {
		rows  int
		want  []string
		nargs []int
	}{
		{1, []string{`INSERT INTO s.t (a, b) VALUES ($1, $2)`}, []int{2}},
		{3, []string{`INSERT INTO s.t (a, b) VALUES ($1, $2), ($3, $4), ($5, $6)`}, []int{6}},
		{9, []string{`INSERT INTO s.t (a, b) VALUES ` + rowsText(0, 9)}, []int{18}},
		{13, []string{`INSERT INTO s.t (a, b) VALUES ` + rowsText(0, 10), `INSERT INTO s.t (a, b) VALUES ` + rowsText(0, 3)}, []int{20, 6}},
	} {
		tx := &recordTx{}
		err := p.Exec(context.Background(), tx, tc.rows, func(i int, args []any) ([]any, error) {
			return append(args, i, "v"+strconv.Itoa(i)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(tx.execs) != len(tc.want) {
			t.Fatalf("%d rows: %d statements, want %d", tc.rows, len(tx.execs), len(tc.want))
		}
		row := 0
		for k, ex := range tx.execs {
			if ex.query != tc.want[k] {
				t.Fatalf("%d rows, statement %d:\n got %s\nwant %s", tc.rows, k, ex.query, tc.want[k])
			}
			if len(ex.args) != tc.nargs[k] {
				t.Fatalf("%d rows, statement %d: %d args, want %d", tc.rows, k, len(ex.args), tc.nargs[k])
			}
			for j := 0; j < len(ex.args); j += 2 {
				if ex.args[j] != row {
					t.Fatalf("%d rows: statement %d binds row %v at %d, want %d", tc.rows, k, ex.args[j], j, row)
				}
				row++
			}
		}
	}

	// The old entry point builds the same text.
	tx := &recordTx{}
	err := sqlstore.MultiInsert(context.Background(), tx, "s.t", []string{"a", "b"}, 3, 10, dollar, func(i int) ([]any, error) {
		return []any{i, "x"}, nil
	})
	if err != nil || len(tx.execs) != 1 || tx.execs[0].query != `INSERT INTO s.t (a, b) VALUES ($1, $2), ($3, $4), ($5, $6)` {
		t.Fatalf("MultiInsert: %v %+v", err, tx.execs)
	}
}

// TestPreparedInsertErrors: a row error stops before any SQL of its chunk;
// an Exec error is returned as is.
func TestPreparedInsertErrors(t *testing.T) {
	p := sqlstore.NewPreparedInsert("t", []string{"a"}, 2, dollar)
	bad := errors.New("bad row")
	tx := &recordTx{}
	err := p.Exec(context.Background(), tx, 3, func(i int, args []any) ([]any, error) {
		if i == 2 {
			return args, bad
		}
		return append(args, i), nil
	})
	if !errors.Is(err, bad) || len(tx.execs) != 1 {
		t.Fatalf("err = %v after %d statements, want the row error after 1", err, len(tx.execs))
	}
	boom := errors.New("boom")
	tx = &recordTx{fail: boom}
	if err := p.Exec(context.Background(), tx, 1, func(i int, args []any) ([]any, error) { return append(args, i), nil }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func rowsText(first, rows int) string {
	var parts []string
	n := first * 2
	for range rows {
		parts = append(parts, "("+dollar(n+1)+", "+dollar(n+2)+")")
		n += 2
	}
	return strings.Join(parts, ", ")
}
