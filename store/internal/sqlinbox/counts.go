package sqlinbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/txbox/txbox"
)

// Counts is InboxCounts on a database/sql pool: CountsQuery over table,
// read by ScanCounts.
func Counts(ctx context.Context, db *sql.DB, dialect, table string) (map[string]map[txbox.Status]int64, error) {
	rows, err := db.QueryContext(ctx, CountsQuery(table))
	if err != nil {
		return nil, fmt.Errorf("%s: inbox counts: %w", dialect, err)
	}
	defer rows.Close()
	out, err := ScanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: inbox counts: %w", dialect, err)
	}
	return out, nil
}

// ScanCounts reads the rows of CountsQuery: per consumer, per status.
func ScanCounts(rows Rows) (map[string]map[txbox.Status]int64, error) {
	out := map[string]map[txbox.Status]int64{}
	for rows.Next() {
		var c, st string
		var n int64
		if err := rows.Scan(&c, &st, &n); err != nil {
			return nil, err
		}
		if out[c] == nil {
			out[c] = map[txbox.Status]int64{}
		}
		out[c][txbox.Status(st)] = n
	}
	return out, rows.Err()
}
