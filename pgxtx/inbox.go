package pgxtx

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/store"
)

// Beginner is a *pgxpool.Pool, *pgx.Conn, or anything that begins a pgx
// transaction.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Inbox begins the inbox consumer's transactions on a pgx database: the
// BeginInbox of the PostgreSQL store. Keep one per database for the life of
// the process: it learns which SQL texts may carry a savepoint along in
// their batch (see store.InboxTx).
type Inbox struct {
	db    Beginner
	known *sqlSet
}

// NewInbox returns an Inbox on db.
func NewInbox(db Beginner) *Inbox { return &Inbox{db: db, known: &sqlSet{}} }

// Begin begins a transaction. With shared, the transaction will hold many
// events, each under a savepoint that is sent with the handler's first
// statement instead of in a round trip of its own.
func (b *Inbox) Begin(ctx context.Context, shared bool) (store.InboxTx[pgx.Tx], error) {
	tx, err := b.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if !shared {
		return &inboxTx{Tx: Wrap(tx), native: tx}, nil
	}
	sp := &spTx{Tx: tx, known: b.known}
	return &inboxTx{Tx: Wrap(sp), native: sp, sp: sp}, nil
}

var errNotShared = errors.New("pgxtx: savepoints need a shared inbox transaction")

// inboxTx is an inbox transaction: the inbox's statements and the
// handler's go through native (the savepoint-carrying spTx when shared).
type inboxTx struct {
	store.Tx
	native pgx.Tx
	sp     *spTx // nil unless shared
}

func (t *inboxTx) Native() pgx.Tx { return t.native }

func (t *inboxTx) Savepoint(context.Context) error {
	if t.sp == nil {
		return errNotShared
	}
	return t.sp.mark()
}

func (t *inboxTx) RollbackToSavepoint(ctx context.Context) error {
	if t.sp == nil {
		return errNotShared
	}
	return t.sp.undo(ctx)
}

func (t *inboxTx) Commit(ctx context.Context) error { return t.native.Commit(ctx) }

func (t *inboxTx) Rollback(ctx context.Context) error { return t.native.Rollback(ctx) }

// LearnSQL records q as a statement that ran on its own without error, as
// if it had: a test seam for what the savepoint batching decides. It is
// reached by a type assertion on the InboxTx and is no part of any
// interface.
func (t *inboxTx) LearnSQL(q string) { t.sp.known.add(q) }

// KnowsSQL reports whether q may carry a savepoint in its batch (a test
// seam, as LearnSQL).
func (t *inboxTx) KnowsSQL(q string) bool { return t.sp.known.has(q) }
