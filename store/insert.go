package store

import (
	"context"
	"strings"
)

// MultiInsert writes n rows into table with one multi-row INSERT per chunk
// rows: the statement shape is shared by every dialect, the placeholders
// (ph, 1-based) and the values of row i are the dialect's.
func MultiInsert(ctx context.Context, tx Tx, table string, cols []string, n, chunk int, ph func(i int) string, row func(i int) ([]any, error)) error {
	head := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES `
	for start := 0; start < n; start += chunk {
		end := min(n, start+chunk)
		var b strings.Builder
		b.WriteString(head)
		args := make([]any, 0, (end-start)*len(cols))
		for i := start; i < end; i++ {
			if i > start {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for c := range cols {
				if c > 0 {
					b.WriteString(", ")
				}
				b.WriteString(ph(len(args) + c + 1))
			}
			b.WriteByte(')')
			vals, err := row(i)
			if err != nil {
				return err
			}
			args = append(args, vals...)
		}
		if _, err := tx.Exec(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// EventColumns are the outbox columns every dialect's InsertEvents writes.
var EventColumns = []string{"event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type", "payload", "headers", "occurred_at"}
