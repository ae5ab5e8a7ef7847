package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/store"
)

// The PostgreSQL store is what inbox.New takes: its handlers get a pgx.Tx.
var _ store.InboxStore[pgx.Tx] = (*Store)(nil)

// InboxDialect is the store's inbox SQL.
func (s *Store) InboxDialect() store.InboxDialect { return inboxDialect{Dialect{Tables: s.tables}} }

// BeginInbox begins an inbox consumer's transaction on the store's pool.
func (s *Store) BeginInbox(ctx context.Context, shared bool) (store.InboxTx[pgx.Tx], error) {
	return s.inbox.Begin(ctx, shared)
}
