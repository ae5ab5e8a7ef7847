package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store/internal/sqlmigrate"
)

//go:embed sql/*.sql
var migrationFS embed.FS

// splitStatements cuts a migration file into statements: full-line "--"
// comments are dropped and a statement ends with ";" at the end of a line.
// (The driver runs one statement per call unless multiStatements is set.)
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			out = append(out, stmt)
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		out = append(out, rest)
	}
	return out
}

// createIndexRE recognises the CREATE INDEX statements that must be skipped
// when the index exists: MySQL 8 has no CREATE INDEX IF NOT EXISTS.
var createIndexRE = regexp.MustCompile(`(?is)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(\w+)\s+ON\s+(?:(\w+)\.)?(\w+)\s*\(`)

// migrateLockTimeout bounds the wait for another process's migration.
const migrateLockTimeout = 60 * time.Second

// Migrate applies the embedded migrations that are not yet recorded.
//
// MySQL DDL commits implicitly, so a transaction cannot make a migration
// atomic. Instead: a named lock (GET_LOCK, held by this session) makes two
// processes take turns; every statement is idempotent (CREATE TABLE IF NOT
// EXISTS; CREATE INDEX only when information_schema lacks the index), so a
// migration interrupted half way is simply run again; and the version is
// recorded only after all its statements succeeded.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := sqlmigrate.Load(migrationFS, s.tables, nil)
	if err != nil {
		return err
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	defer c.Close()

	versions := s.tables.Qualified(s.tables.Outbox + "_migrations")
	sum := sha256.Sum256([]byte(versions))
	lock := "txbox-migrate-" + hex.EncodeToString(sum[:16]) // GET_LOCK names: at most 64 characters
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, s.q.namedLock, lock, int(migrateLockTimeout/time.Second)).Scan(&got); err != nil {
		return fmt.Errorf("mysql: migrate: lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("mysql: migrate: another migration held the lock for %v", migrateLockTimeout)
	}
	defer func() {
		var released sql.NullInt64
		_ = c.QueryRowContext(context.WithoutCancel(ctx), s.q.namedUnlock, lock).Scan(&released)
	}()

	if s.tables.Schema != "" {
		if _, err := c.ExecContext(ctx, s.q.createDatabase); err != nil {
			return fmt.Errorf("mysql: migrate: database: %w", err)
		}
	}
	if _, err := c.ExecContext(ctx, s.q.migrationsTable); err != nil {
		return fmt.Errorf("mysql: migrate: versions table: %w", err)
	}
	err = sqlmigrate.Apply(ms, sqlmigrate.Conn(ctx, c, s.q.migrationApplied, s.q.migrationRecord, func(m sqlstore.Migration) error {
		for _, stmt := range splitStatements(m.SQL) {
			if err := s.migrateStatement(ctx, c, stmt); err != nil {
				return err
			}
		}
		return nil
	}), s.log)
	if err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	return nil
}

func (s *Store) migrateStatement(ctx context.Context, c *sql.Conn, stmt string) error {
	if m := createIndexRE.FindStringSubmatch(stmt); m != nil {
		index, schema, table := m[1], m[2], m[3]
		var n int
		err := c.QueryRowContext(ctx, s.q.indexExists, schema, table, index).Scan(&n)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	_, err := c.ExecContext(ctx, stmt)
	return err
}
