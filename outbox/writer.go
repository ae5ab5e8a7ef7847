// Package outbox is the write side: it adds events to the outbox table inside
// the caller's own transaction, so they commit or roll back with the business
// change. It opens no connection and starts no transaction of its own.
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/telemetry"
)

// Writer adds events through one dialect. It is safe for concurrent use.
type Writer struct {
	d      store.Dialect // as given: Notify is looked up here
	ins    store.Dialect // d prepared once (table names checked, INSERT text built), or d
	err    error         // the dialect's configuration error, returned by every Add
	notify bool
	// emit: events go into the change log, not the table (WithCDCMessages).
	emit store.MessageEmitter
	cdc  bool
	// tracer stores the caller's trace context in the headers (WithTracer);
	// nil: none.
	tracer telemetry.Tracer
}

// Option configures a Writer.
type Option func(*Writer)

// WithWakeup makes every Add also wake the relay at commit, where the
// dialect supports it (PostgreSQL NOTIFY, once per Add, never per row).
// Without it the relay finds new rows by polling.
func WithWakeup() Option { return func(w *Writer) { w.notify = true } }

// WithCDCMessages makes every Add write its events into the database's
// change log instead of the outbox table (PostgreSQL: one logical decoding
// message per event, pg_logical_emit_message, inside the caller's
// transaction): same atomicity, no row to insert, archive or clean up. Only
// a relay in CDC mode (`txbox relay --mode cdc`) delivers them; the polling
// relay never sees them. Each event still gets an outbox id from the table's
// sequence. With a dialect that cannot do it, every Add fails with
// ErrNoCDCMessages.
func WithCDCMessages() Option { return func(w *Writer) { w.cdc = true } }

// WithTracer makes every Add store the trace context of the caller's span
// (the ctx it is given) in the headers of every event that has none of its
// own, so the relay and the consumers continue the caller's trace: with
// telemetry/otel, the traceparent and tracestate headers of OpenTelemetry's
// span in ctx. Without it Add leaves the headers as they are.
func WithTracer(t telemetry.Tracer) Option { return func(w *Writer) { w.tracer = t } }

// ErrNoCDCMessages: the writer's dialect cannot emit events into a change
// log (WithCDCMessages needs PostgreSQL).
var ErrNoCDCMessages = errors.New("outbox: WithCDCMessages needs a dialect with a change log (PostgreSQL)")

// Notifier is a dialect that can wake the relay from inside a transaction.
type Notifier interface {
	Notify(ctx context.Context, tx interface {
		Exec(ctx context.Context, query string, args ...any) (int64, error)
	}) error
}

// NewWriter returns a writer for d, e.g. postgres.Dialect{} or the
// dialect of an opened store (store.Dialect()). The dialect's table names
// are validated here, once; a bad name is the error of every Add.
func NewWriter(d store.Dialect, opts ...Option) *Writer {
	w := &Writer{d: d, ins: d}
	if p, ok := d.(store.Preparer); ok {
		w.ins, w.err = p.Prepare()
	}
	for _, o := range opts {
		o(w)
	}
	if w.cdc {
		if e, ok := w.ins.(store.MessageEmitter); ok {
			w.emit = e
		} else if w.err == nil {
			w.err = fmt.Errorf("%w (dialect %s)", ErrNoCDCMessages, d.Name())
		}
	}
	return w
}

// Add writes events in one multi-row INSERT on tx. With WithTracer, the
// trace context of the span ctx carries is stored in the headers of every
// event that has none (traceparent and tracestate). Missing ids and
// occurred-at times are filled in here, once, so a retry of the same Event
// value never produces a second id. Every event is validated here, before
// any SQL: an invalid one fails with an error wrapping txbox.ErrInvalidEvent.
func (w *Writer) Add(ctx context.Context, tx store.Tx, events ...txbox.Event) error {
	if len(events) == 0 {
		return nil
	}
	prepared := make([]txbox.Event, len(events))
	var now time.Time // one time for the whole call, read when first needed
	for i, e := range events {
		if e.ID == "" {
			e.ID = txbox.NewID()
		}
		if e.OccurredAt.IsZero() {
			if now.IsZero() {
				now = time.Now().UTC()
			}
			e.OccurredAt = now
		}
		if len(e.Payload) == 0 {
			e.Payload = []byte("null")
		}
		// The caller's span, if any, travels with the event so the relay
		// and the consumers continue its trace; a traceparent the caller
		// set is kept.
		if w.tracer != nil {
			e.Headers = w.tracer.Inject(ctx, e.Headers)
		}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("outbox: event %d: %w", i, err)
		}
		prepared[i] = e
	}
	if w.err != nil {
		return w.err
	}
	if w.emit != nil {
		// The change log carries them; a wake-up would wake no one.
		return w.emit.EmitEvents(ctx, tx, prepared)
	}
	if err := w.ins.InsertEvents(ctx, tx, prepared); err != nil {
		return err
	}
	if n, ok := w.d.(Notifier); ok && w.notify {
		return n.Notify(ctx, tx)
	}
	return nil
}

// AddSQL is Add for a database/sql transaction.
func (w *Writer) AddSQL(ctx context.Context, tx *sql.Tx, events ...txbox.Event) error {
	return w.Add(ctx, store.SQLTx(tx), events...)
}
