package sqlstore

import (
	"context"
	"strings"

	"github.com/txbox/txbox/store"
)

// MultiInsert writes n rows into table with one multi-row INSERT per chunk
// rows: the statement shape is shared by every dialect, the placeholders
// (ph, 1-based) and the values of row i are the dialect's. It builds the
// statement on every call; a dialect that inserts often into the same table
// keeps a PreparedInsert instead.
func MultiInsert(ctx context.Context, tx store.Tx, table string, cols []string, n, chunk int, ph func(i int) string, row func(i int) ([]any, error)) error {
	return NewPreparedInsert(table, cols, chunk, ph).Exec(ctx, tx, n, func(i int, args []any) ([]any, error) {
		vals, err := row(i)
		return append(args, vals...), err
	})
}

// preparedRows is how many row counts a PreparedInsert keeps the statement
// text of: the usual transaction adds one event, or a handful.
const preparedRows = 8

// PreparedInsert is a multi-row INSERT into one table whose text is built
// once: for 1 to 8 rows at construction, for more rows per call. The table
// name and columns are trusted: the dialect validated them before.
type PreparedInsert struct {
	head  string // INSERT INTO t (c1, c2) VALUES
	cols  int
	chunk int
	ph    func(i int) string
	small [preparedRows + 1]string // small[k]: the statement for k rows
}

// NewPreparedInsert builds the INSERT of cols into table, chunk rows at most
// per statement, with the dialect's placeholders ph (1-based).
func NewPreparedInsert(table string, cols []string, chunk int, ph func(i int) string) *PreparedInsert {
	p := &PreparedInsert{
		head:  `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES `,
		cols:  len(cols),
		chunk: max(chunk, 1),
		ph:    ph,
	}
	for k := 1; k <= min(preparedRows, p.chunk); k++ {
		p.small[k] = p.build(k)
	}
	return p
}

// build returns the statement for rows rows.
func (p *PreparedInsert) build(rows int) string {
	var b strings.Builder
	b.Grow(len(p.head) + rows*p.cols*6)
	b.WriteString(p.head)
	n := 0
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range p.cols {
			if c > 0 {
				b.WriteString(", ")
			}
			n++
			b.WriteString(p.ph(n))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Exec inserts n rows, one statement per chunk. row appends the values of
// row i (one per column) to args and returns it.
func (p *PreparedInsert) Exec(ctx context.Context, tx store.Tx, n int, row func(i int, args []any) ([]any, error)) error {
	for start := 0; start < n; start += p.chunk {
		end := min(n, start+p.chunk)
		args := make([]any, 0, (end-start)*p.cols)
		for i := start; i < end; i++ {
			var err error
			if args, err = row(i, args); err != nil {
				return err
			}
		}
		q := ""
		if rows := end - start; rows <= preparedRows {
			q = p.small[rows]
		} else {
			q = p.build(rows)
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// EventColumns are the outbox columns every dialect's InsertEvents writes.
var EventColumns = []string{"event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type", "payload", "headers", "occurred_at"}
