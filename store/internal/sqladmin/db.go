package sqladmin

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// The database/sql stores (MySQL, SQLite) run their counts through these.

// Stats runs q, whose rows are (status, count), on db: the counts of
// store.Stats and its DEAD rows. The caller adds the oldest unsent row.
func Stats(ctx context.Context, db *sql.DB, dialect, q string) (store.Stats, error) {
	counts, err := QueryStatusCounts(ctx, db, dialect, "stats", q)
	if err != nil {
		return store.Stats{Counts: map[txbox.Status]int64{}}, err
	}
	return store.Stats{Counts: counts, Dead: counts[txbox.StatusDead]}, nil
}

// QueryStatusCounts runs q, whose rows are (status, count), on db and reads
// them with StatusCounts; errors say "<dialect>: <what>".
func QueryStatusCounts(ctx context.Context, db *sql.DB, dialect, what, q string, args ...any) (map[txbox.Status]int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", dialect, what, err)
	}
	defer rows.Close()
	counts, err := StatusCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", dialect, what, err)
	}
	return counts, nil
}

// Count runs q, which returns one count, on db; errors say
// "<dialect>: <what>".
func Count(ctx context.Context, db *sql.DB, dialect, what, q string, args ...any) (int64, error) {
	var n int64
	if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", dialect, what, err)
	}
	return n, nil
}

// List runs q, a List statement, on db and reads its rows with collect,
// which closes them; errors say "<dialect>: list".
func List(ctx context.Context, db *sql.DB, dialect, q string, args []any, collect func(*sql.Rows) ([]store.Record, error)) ([]store.Record, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: list: %w", dialect, err)
	}
	recs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: list: %w", dialect, err)
	}
	return recs, nil
}
