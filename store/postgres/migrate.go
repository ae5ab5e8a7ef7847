package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store/internal/sqlmigrate"
)

//go:embed sql/*.sql
var migrationFS embed.FS

// Migrate applies the embedded migrations that are not yet recorded
// (queries/migration*.sql). It takes a transaction-scoped advisory lock
// first, so two processes running it at once apply each migration exactly
// once; PostgreSQL's DDL is transactional, so a failed migration leaves
// nothing half done.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := sqlmigrate.Load(migrationFS, s.tables, nil)
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
		err := sqlmigrate.Apply(ms, sqlmigrate.Session{
			Applied: func(version int) (done bool, err error) {
				return done, tx.QueryRow(ctx, s.st.migrationApplied, version).Scan(&done)
			},
			Run: func(m sqlstore.Migration) error {
				_, err := tx.Exec(ctx, m.SQL)
				return err
			},
			Record: func(m sqlstore.Migration) error {
				_, err := tx.Exec(ctx, s.st.migrationRecord, m.Version, m.Name)
				return err
			},
		}, s.log)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	})
}
