package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/txbox/txbox/internal/sqlstore"
)

//go:embed sql/*.sql
var migrationFS embed.FS

func (s *Store) migrations() ([]sqlstore.Migration, error) {
	vars := map[string]string{
		"Outbox":     s.tables.Qualified(s.tables.Outbox),
		"OutboxName": s.tables.Outbox,
		"Inbox":      s.tables.Qualified(s.tables.Inbox),
		"InboxName":  s.tables.Inbox,
		"Schema":     s.tables.Schema,
		"Sent":       s.tables.Qualified(s.tables.Outbox + "_sent"),
		"SentName":   s.tables.Outbox + "_sent",
	}
	return sqlstore.LoadMigrations(migrationFS, "sql", vars)
}

// Migrate applies the embedded migrations that are not yet recorded
// (queries/migration*.sql). It takes
// a transaction-scoped advisory lock first, so two processes running it at
// once apply each migration exactly once; PostgreSQL's DDL is transactional,
// so a failed migration leaves nothing half done.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := s.migrations()
	if err != nil {
		return err
	}
	versions := s.tables.Qualified(s.tables.Outbox + "_migrations")
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.st.advisoryXactLock, "txbox-migrate:"+versions); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if s.tables.Schema != "" {
			if _, err := tx.Exec(ctx, s.st.createSchema); err != nil {
				return fmt.Errorf("migrate: schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, s.st.migrationsTable); err != nil {
			return fmt.Errorf("migrate: versions table: %w", err)
		}
		for _, m := range ms {
			var done bool
			if err := tx.QueryRow(ctx, s.st.migrationApplied, m.Version).Scan(&done); err != nil {
				return err
			}
			if done {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate: %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, s.st.migrationRecord, m.Version, m.Name); err != nil {
				return err
			}
			s.log.Info("migration applied", "version", m.Version, "name", m.Name)
		}
		return nil
	})
}
