package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Recorder collects the domain events raised while a unit of work runs. The
// events are written just before COMMIT: the Go counterpart of Spring's
// BEFORE_COMMIT listener. Business code can record
// through the context without knowing about the outbox.
type Recorder struct {
	mu     sync.Mutex
	events []txbox.Event
}

// Record queues events for the flush before commit.
func (r *Recorder) Record(events ...txbox.Event) {
	r.mu.Lock()
	r.events = append(r.events, events...)
	r.mu.Unlock()
}

// Events returns what was recorded so far.
func (r *Recorder) Events() []txbox.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]txbox.Event(nil), r.events...)
}

type recorderKey struct{}

// Record queues events on the unit of work running in ctx. It fails when ctx
// carries none: an event raised outside a transaction would be lost silently.
func Record(ctx context.Context, events ...txbox.Event) error {
	r, ok := ctx.Value(recorderKey{}).(*Recorder)
	if !ok {
		return ErrNoUnitOfWork
	}
	r.Record(events...)
	return nil
}

// ErrNoUnitOfWork: Record was called outside a unit of work (RunSQL,
// RunInTx, pgxtx.Run).
var ErrNoUnitOfWork = errors.New("outbox: no unit of work in context")

// RunSQL runs fn in a database/sql transaction. Events recorded during fn
// (on the Recorder or through Record(ctx, ...)) are inserted before COMMIT;
// if fn or that insert fails, the whole transaction rolls back and nothing is
// emitted.
func (w *Writer) RunSQL(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx, rec *Recorder) error) (err error) {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("outbox: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = w.RunInTx(ctx, store.SQLTx(tx), func(ctx context.Context, rec *Recorder) error { return fn(ctx, tx, rec) }); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("outbox: commit: %w", err)
	}
	return nil
}

// RunInTx runs fn as a unit of work inside tx, a transaction the caller
// began and commits or rolls back: events recorded during fn (on the
// Recorder or through Record(ctx, ...)) are added to tx when fn returns nil.
// An error from fn or from that insert is returned, and the caller must then
// roll tx back. RunSQL and pgxtx.Run are RunInTx with the begin and the
// commit around it; any driver with a store.Tx adapter can do the same.
func (w *Writer) RunInTx(ctx context.Context, tx store.Tx, fn func(ctx context.Context, rec *Recorder) error) error {
	rec := &Recorder{}
	if err := fn(context.WithValue(ctx, recorderKey{}, rec), rec); err != nil {
		return err
	}
	if err := w.Add(ctx, tx, rec.Events()...); err != nil {
		return fmt.Errorf("outbox: flush before commit: %w", err)
	}
	return nil
}
