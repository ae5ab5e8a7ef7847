package inbox

import (
	"context"
	"reflect"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// New returns a consumer of the events cfg.Subscriber delivers, applied by h
// exactly once per cfg.Name on st, the store that holds the inbox table. The
// handler gets the store's own transaction: a pgx.Tx from the PostgreSQL
// store, a *sql.Tx from MySQL and SQLite (or from store.SQLInbox). The
// inbox SQL and the replay requests come from st as well.
func New[T any](st store.InboxStore[T], cfg Config, h func(ctx context.Context, tx T, e txbox.Event) error) (*Consumer, error) {
	if st == nil || isNilPointer(st) {
		return nil, &txbox.ConfigError{Field: "store", Reason: "required"}
	}
	if h == nil {
		return nil, &txbox.ConfigError{Field: "handler", Reason: "required"}
	}
	d := st.InboxDialect()
	if d == nil {
		return nil, &txbox.ConfigError{Field: "store", Reason: "has no inbox SQL"}
	}
	return newConsumer(cfg, d, st, storeDB[T]{st}, func(ctx context.Context, native any, e txbox.Event) error {
		return h(ctx, native.(T), e)
	})
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// storeDB begins the consumer's transactions on its store.
type storeDB[T any] struct{ st store.InboxStore[T] }

func (s storeDB[T]) begin(ctx context.Context) (store.Tx, any, func() error, func() error, error) {
	tx, err := s.st.BeginInbox(ctx, false)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	bg := context.WithoutCancel(ctx)
	return tx, tx.Native(), func() error { return tx.Commit(bg) }, func() error { return tx.Rollback(bg) }, nil
}

func (s storeDB[T]) beginShared(ctx context.Context) (store.Tx, any, savepoints, func() error, func() error, error) {
	tx, err := s.st.BeginInbox(ctx, true)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	bg := context.WithoutCancel(ctx)
	return tx, tx.Native(), txSavepoints[T]{tx}, func() error { return tx.Commit(bg) }, func() error { return tx.Rollback(bg) }, nil
}

type txSavepoints[T any] struct{ tx store.InboxTx[T] }

func (s txSavepoints[T]) mark(ctx context.Context) error { return s.tx.Savepoint(ctx) }
func (s txSavepoints[T]) undo(ctx context.Context) error { return s.tx.RollbackToSavepoint(ctx) }
