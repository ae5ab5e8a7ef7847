package pgxtx

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
)

// Add is w.Add on a pgx transaction: it writes events in one multi-row
// INSERT on tx, to commit or roll back with the caller's own changes.
func Add(ctx context.Context, tx pgx.Tx, w *outbox.Writer, events ...txbox.Event) error {
	return w.Add(ctx, Wrap(tx), events...)
}

// Run is w.RunSQL for pgx: it begins a transaction on db (a
// *pgxpool.Pool, *pgx.Conn or anything that begins a pgx transaction) and
// runs fn in it. Events recorded during fn (on the Recorder or through
// outbox.Record(ctx, ...)) are inserted before COMMIT; if fn or that insert
// fails, the whole transaction rolls back and nothing is emitted.
func Run(ctx context.Context, db Beginner, w *outbox.Writer, fn func(ctx context.Context, tx pgx.Tx, rec *outbox.Recorder) error) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("outbox: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = w.RunInTx(ctx, Wrap(tx), func(ctx context.Context, rec *outbox.Recorder) error { return fn(ctx, tx, rec) }); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("outbox: commit: %w", err)
	}
	return nil
}
