package postgres

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func (s *Store) migrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFS, "sql")
	if err != nil {
		return nil, err
	}
	vars := map[string]string{
		"Outbox":     s.tables.Qualified(s.tables.Outbox),
		"OutboxName": s.tables.Outbox,
		"Inbox":      s.tables.Qualified(s.tables.Inbox),
		"InboxName":  s.tables.Inbox,
		"Schema":     s.tables.Schema,
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

// Migrate applies the embedded migrations that are not yet recorded. It takes
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
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "txbox-migrate:"+versions); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if s.tables.Schema != "" {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s.tables.Schema); err != nil {
				return fmt.Errorf("migrate: schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+versions+` (
			version INT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("migrate: versions table: %w", err)
		}
		for _, m := range ms {
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+versions+` WHERE version = $1)`, m.version).Scan(&done); err != nil {
				return err
			}
			if done {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migrate: %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+versions+` (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
			s.log.Info("migration applied", "version", m.version, "name", m.name)
		}
		return nil
	})
}
