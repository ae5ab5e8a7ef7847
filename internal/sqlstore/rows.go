package sqlstore

// Rows is what *sql.Rows and pgx.Rows have in common.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Collect reads every row with scan. The caller closes rows (Close differs
// between database/sql and pgx).
func Collect[T any](rows Rows, scan func(row interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
