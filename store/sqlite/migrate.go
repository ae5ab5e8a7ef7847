package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store/internal/sqlmigrate"
)

//go:embed sql/*.sql
var migrationFS embed.FS

// nowMicros is the SQL for "now" as unix microseconds, usable in a column
// DEFAULT. julianday('now') works on every SQLite a foreign producer might
// use (unixepoch('subsec') needs 3.42); SQLite's clock has milliseconds.
const nowMicros = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000`

// Migrate applies the embedded migrations that are not yet recorded, all in
// one BEGIN IMMEDIATE transaction (queries/migration*.sql): a second process migrating at the same
// time waits for the write lock and then finds every version recorded.
// SQLite's DDL is transactional, so a failed migration leaves nothing behind.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := sqlmigrate.Load(migrationFS, s.tables, map[string]string{"NowMicros": nowMicros})
	if err != nil {
		return err
	}
	err = s.immediate(ctx, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, s.q.migrationsTable); err != nil {
			return fmt.Errorf("versions table: %w", err)
		}
		return sqlmigrate.Apply(ms, sqlmigrate.Conn(ctx, c, s.q.migrationApplied, s.q.migrationRecord, func(m sqlstore.Migration) error {
			_, err := c.ExecContext(ctx, m.SQL)
			return err
		}), s.log)
	})
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}
