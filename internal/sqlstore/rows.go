package sqlstore

import "database/sql"

// Collect reads every row with scan and closes rows.
func Collect[T any](rows *sql.Rows, scan func(row interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	defer rows.Close()
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
