package store

import (
	"context"
	"database/sql"
	"errors"
)

// InboxTx is one transaction of the inbox consumer, begun by the store: the
// inbox's statements run on it (Tx) and the handler gets Native, the
// driver's own transaction (pgx.Tx, *sql.Tx), so that the handler's writes
// and the inbox row commit together.
type InboxTx[T any] interface {
	Tx
	// Native is the transaction handed to the handler.
	Native() T
	// Savepoint starts the next event's savepoint in a shared transaction
	// (inbox.Config.TxBatch > 1), releasing the previous event's.
	Savepoint(ctx context.Context) error
	// RollbackToSavepoint undoes what ran since the last Savepoint.
	RollbackToSavepoint(ctx context.Context) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// InboxStore is a database an inbox consumer runs on (inbox.New): its inbox
// SQL, the operators' view of the inbox table, and transactions whose
// native form T is what the handler gets. The PostgreSQL store is an
// InboxStore[pgx.Tx]; the MySQL and SQLite stores are InboxStore[*sql.Tx];
// SQLInbox makes one of any store and a *sql.DB.
type InboxStore[T any] interface {
	InboxAdmin
	InboxDialect() InboxDialect
	// BeginInbox begins a transaction; shared says it will hold many
	// events, each under a savepoint.
	BeginInbox(ctx context.Context, shared bool) (InboxTx[T], error)
}

// SQLInbox runs the inbox of st through db, a database/sql handle on the
// same database: a handler then gets a *sql.Tx. It is how the MySQL and
// SQLite stores begin their inbox transactions, and how a PostgreSQL user
// of database/sql (pgx's stdlib driver) gets a *sql.Tx instead of a pgx.Tx.
// st gives the inbox SQL and the operators' view (every store of this
// module does).
func SQLInbox(db *sql.DB, st interface {
	InboxDialect() InboxDialect
	InboxAdmin
}) (InboxStore[*sql.Tx], error) {
	if db == nil {
		return nil, errors.New("store: SQLInbox: nil *sql.DB")
	}
	return sqlInbox{InboxAdmin: st, db: db, d: st.InboxDialect()}, nil
}

type sqlInbox struct {
	InboxAdmin
	db *sql.DB
	d  InboxDialect
}

func (s sqlInbox) InboxDialect() InboxDialect { return s.d }

func (s sqlInbox) BeginInbox(ctx context.Context, _ bool) (InboxTx[*sql.Tx], error) {
	return BeginSQLInbox(ctx, s.db)
}

// BeginSQLInbox begins an inbox transaction on db whose savepoints are
// statements of their own: the database/sql side of an InboxStore.
func BeginSQLInbox(ctx context.Context, db *sql.DB) (InboxTx[*sql.Tx], error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &sqlInboxTx{Tx: SQLTx(tx), native: tx}, nil
}

// spName is the one savepoint name of a shared transaction: each event's
// savepoint releases the previous event's before it is taken, so at most
// one exists at a time (beside any a handler takes itself).
const spName = "txbox_sp"

type sqlInboxTx struct {
	Tx
	native *sql.Tx
	live   bool // a savepoint named spName exists
}

func (t *sqlInboxTx) Native() *sql.Tx { return t.native }

func (t *sqlInboxTx) Savepoint(ctx context.Context) error {
	if t.live {
		if _, err := t.Exec(ctx, "RELEASE SAVEPOINT "+spName); err != nil {
			return err
		}
		t.live = false
	}
	if _, err := t.Exec(ctx, "SAVEPOINT "+spName); err != nil {
		return err
	}
	t.live = true
	return nil
}

func (t *sqlInboxTx) RollbackToSavepoint(ctx context.Context) error {
	_, err := t.Exec(ctx, "ROLLBACK TO SAVEPOINT "+spName)
	return err
}

func (t *sqlInboxTx) Commit(context.Context) error { return t.native.Commit() }

func (t *sqlInboxTx) Rollback(context.Context) error { return t.native.Rollback() }
