package sqladmin

import (
	"context"
	"database/sql"
	"encoding/json"
)

// Execer runs a statement: a *sql.Tx or a *sql.Conn.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// ChangeDead runs q, a Replay's or Purge's statement, on on and, when it
// changed rows, release, in the caller's transaction: the rows held behind
// the DEAD rows it changed go on (store.DeadBlocker).
func ChangeDead(ctx context.Context, on Execer, q string, args []any, release func() error) (int64, error) {
	res, err := on.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return n, err
	}
	return n, release()
}

// TypesJSON is a JSON array of aggregate types for ReleaseHeld's
// statements (nil: an empty one).
func TypesJSON(types []string) string {
	if types == nil {
		types = []string{}
	}
	b, _ := json.Marshal(types)
	return string(b)
}
