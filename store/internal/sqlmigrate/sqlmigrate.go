// Package sqlmigrate is how the SQL stores apply their embedded
// migrations (sql/NNN_*.sql): rendered for the store's tables, each one
// not yet recorded is run, recorded and logged, in version order. Each
// store keeps what differs: the lock that makes two processes take turns,
// and whether a migration runs in one transaction.
package sqlmigrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// Load reads the migrations in dir "sql" of fsys, rendered for t: Outbox,
// Sent (its archive) and Inbox are the tables as SQL names them, the same
// with Name the bare names (for derived identifiers), Schema the schema;
// extra adds a store's own values.
func Load(fsys fs.FS, t store.Tables, extra map[string]string) ([]sqlstore.Migration, error) {
	vars := map[string]string{
		"Outbox":     t.Qualified(t.Outbox),
		"OutboxName": t.Outbox,
		"Sent":       t.Qualified(t.Outbox + "_sent"),
		"SentName":   t.Outbox + "_sent",
		"Inbox":      t.Qualified(t.Inbox),
		"InboxName":  t.Inbox,
		"Schema":     t.Schema,
	}
	maps.Copy(vars, extra)
	return sqlstore.LoadMigrations(fsys, "sql", vars)
}

// Session is where a store runs its migrations: the connection or the
// transaction it holds.
type Session struct {
	Applied func(version int) (bool, error) // whether version is recorded
	Run     func(m sqlstore.Migration) error
	Record  func(m sqlstore.Migration) error // m is applied
}

// Conn is the Session of a database/sql connection: applied counts the
// records of a version, record inserts one (version, name); run applies a
// migration.
func Conn(ctx context.Context, c *sql.Conn, applied, record string, run func(m sqlstore.Migration) error) Session {
	return Session{
		Applied: func(version int) (bool, error) {
			var n int
			err := c.QueryRowContext(ctx, applied, version).Scan(&n)
			return n > 0, err
		},
		Run: run,
		Record: func(m sqlstore.Migration) error {
			_, err := c.ExecContext(ctx, record, m.Version, m.Name)
			return err
		},
	}
}

// Apply runs each migration of ms that s has not recorded, in order, and
// records and logs it. An error names the migration that failed.
func Apply(ms []sqlstore.Migration, s Session, log *slog.Logger) error {
	for _, m := range ms {
		done, err := s.Applied(m.Version)
		if err != nil {
			return err
		}
		if done {
			continue
		}
		if err := s.Run(m); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if err := s.Record(m); err != nil {
			return err
		}
		log.Info("migration applied", "version", m.Version, "name", m.Name)
	}
	return nil
}
