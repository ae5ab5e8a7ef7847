package mysql

import (
	"context"
	"database/sql"

	"github.com/txbox/txbox/store"
)

// The store is what inbox.New takes: its handlers get a *sql.Tx.
var _ store.InboxStore[*sql.Tx] = (*Store)(nil)

// InboxDialect is the store's inbox SQL.
func (s *Store) InboxDialect() store.InboxDialect { return inboxDialect{Dialect{Tables: s.tables}} }

// BeginInbox begins an inbox consumer's transaction on the store's pool.
func (s *Store) BeginInbox(ctx context.Context, _ bool) (store.InboxTx[*sql.Tx], error) {
	return store.BeginSQLInbox(ctx, s.db)
}
