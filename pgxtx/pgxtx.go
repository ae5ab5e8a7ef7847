// Package pgxtx is txbox on pgx v5 transactions: it adapts them to what
// txbox runs its SQL on (store.Tx), writes events in them (Add, Run: the
// outbox's pgx entry points) and begins the inbox consumer's pgx
// transactions. It depends on pgx, store and outbox only, not on the
// PostgreSQL store or pgx's pool; package outbox itself compiles no driver.
package pgxtx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txbox/txbox/store"
)

// Execer is a pgx.Tx, *pgx.Conn or *pgxpool.Pool: what Wrap adapts.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Wrap adapts a pgx transaction (or pool, or conn) to store.Tx.
func Wrap(tx Execer) store.Tx { return wrapped{tx} }

type wrapped struct{ tx Execer }

func (t wrapped) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t wrapped) QueryRow(ctx context.Context, q string, args ...any) store.Row {
	return t.tx.QueryRow(ctx, q, args...)
}
