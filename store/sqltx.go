package store

import (
	"context"
	"database/sql"
)

// SQLTx adapts *sql.Tx (or *sql.Conn, *sql.DB) to Tx.
func SQLTx(tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) Tx {
	return sqlTx{tx}
}

type sqlTx struct {
	tx interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (t sqlTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlTx) QueryRow(ctx context.Context, q string, args ...any) Row {
	return t.tx.QueryRowContext(ctx, q, args...)
}
