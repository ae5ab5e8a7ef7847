package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

//go:embed sql/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// nowMicros is the SQL for "now" as unix microseconds, usable in a column
// DEFAULT. julianday('now') works on every SQLite a foreign producer might
// use (unixepoch('subsec') needs 3.42); SQLite's clock has milliseconds.
const nowMicros = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000`

func (s *Store) migrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFS, "sql")
	if err != nil {
		return nil, err
	}
	vars := map[string]string{
		"Outbox":     s.tables.Outbox,
		"OutboxName": s.tables.Outbox,
		"Inbox":      s.tables.Inbox,
		"InboxName":  s.tables.Inbox,
		"NowMicros":  nowMicros,
	}
	var out []migration
	for _, e := range ents {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: bad name", e.Name())
		}
		raw, err := migrationFS.ReadFile("sql/" + e.Name())
		if err != nil {
			return nil, err
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, vars); err != nil {
			return nil, err
		}
		out = append(out, migration{version: n, name: e.Name(), sql: b.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Migrate applies the embedded migrations that are not yet recorded, all in
// one BEGIN IMMEDIATE transaction: a second process migrating at the same
// time waits for the write lock and then finds every version recorded.
// SQLite's DDL is transactional, so a failed migration leaves nothing behind.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := s.migrations()
	if err != nil {
		return err
	}
	versions := s.tables.Outbox + "_migrations"
	err = s.immediate(ctx, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+versions+` (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL,
			applied_at INTEGER NOT NULL DEFAULT (`+nowMicros+`))`); err != nil {
			return fmt.Errorf("versions table: %w", err)
		}
		for _, m := range ms {
			var n int
			if err := c.QueryRowContext(ctx, `SELECT count(*) FROM `+versions+` WHERE version = ?`, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if _, err := c.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if _, err := c.ExecContext(ctx, `INSERT INTO `+versions+` (version, name) VALUES (?, ?)`, m.version, m.name); err != nil {
				return err
			}
			s.log.Info("migration applied", "version", m.version, "name", m.name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}
