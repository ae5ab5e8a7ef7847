package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/txbox/txbox/internal/sqlstore"
)

//go:embed sql/*.sql
var migrationFS embed.FS

// nowMicros is the SQL for "now" as unix microseconds, usable in a column
// DEFAULT. julianday('now') works on every SQLite a foreign producer might
// use (unixepoch('subsec') needs 3.42); SQLite's clock has milliseconds.
const nowMicros = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000`

func (s *Store) migrations() ([]sqlstore.Migration, error) {
	vars := map[string]string{
		"Outbox":     s.tables.Outbox,
		"OutboxName": s.tables.Outbox,
		"Inbox":      s.tables.Inbox,
		"InboxName":  s.tables.Inbox,
		"NowMicros":  nowMicros,
	}
	return sqlstore.LoadMigrations(migrationFS, "sql", vars)
}

// Migrate applies the embedded migrations that are not yet recorded, all in
// one BEGIN IMMEDIATE transaction (queries/migration*.sql): a second process migrating at the same
// time waits for the write lock and then finds every version recorded.
// SQLite's DDL is transactional, so a failed migration leaves nothing behind.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := s.migrations()
	if err != nil {
		return err
	}
	err = s.immediate(ctx, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, s.q.migrationsTable); err != nil {
			return fmt.Errorf("versions table: %w", err)
		}
		for _, m := range ms {
			var n int
			if err := c.QueryRowContext(ctx, s.q.migrationApplied, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if _, err := c.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if _, err := c.ExecContext(ctx, s.q.migrationRecord, m.Version, m.Name); err != nil {
				return err
			}
			s.log.Info("migration applied", "version", m.Version, "name", m.Name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}
