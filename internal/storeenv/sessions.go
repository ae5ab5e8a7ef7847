package storeenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/postgres"
)

// HoldTransaction opens a REPEATABLE READ transaction that reads the outbox
// table, as a report does: its snapshot holds back VACUUM until end.
func (Postgres) HoldTransaction(t *testing.T, s store.Store) (end func()) {
	t.Helper()
	ps := s.(*postgres.Store)
	ctx := context.Background()
	tx, err := ps.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+ps.Tables().Qualified(ps.Tables().Outbox)).Scan(&n); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(ctx) }
}

// HoldTransaction opens a transaction WITH CONSISTENT SNAPSHOT that reads
// the outbox table, as a report does: its read view holds back InnoDB's
// purge until end.
func (MySQL) HoldTransaction(t *testing.T, s store.Store) (end func()) {
	t.Helper()
	ms := s.(*mysql.Store)
	ctx := context.Background()
	c, err := ms.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := c.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		c.Close()
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "SELECT count(*) FROM "+ms.Tables().Qualified(ms.Tables().Outbox)).Scan(&n); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return func() {
		_, _ = c.ExecContext(ctx, "ROLLBACK")
		_ = c.Close()
	}
}

// KillCleanupHolder terminates the backend that holds s's cleanup lock, a
// session advisory lock on "txbox-cleanup:" and the outbox table
// (store/postgres/cleanuplock.go).
func (Postgres) KillCleanupHolder(t *testing.T, s store.Store) {
	t.Helper()
	ps := s.(*postgres.Store)
	ctx := context.Background()
	var pid int
	if err := ps.Pool().QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
		AND ((classid::int8 << 32) | objid::int8) = hashtext($1)::int8`, "txbox-cleanup:"+ps.Tables().Qualified(ps.Tables().Outbox)).Scan(&pid); err != nil {
		t.Fatalf("the cleanup lock's session in pg_locks: %v", err)
	}
	if _, err := ps.Pool().Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
}

// KillCleanupHolder kills the connection that holds s's cleanup lock, the
// named lock of the outbox table (store/mysql/cleanuplock.go).
func (MySQL) KillCleanupHolder(t *testing.T, s store.Store) {
	t.Helper()
	ms := s.(*mysql.Store)
	ctx := context.Background()
	sum := sha256.Sum256([]byte(ms.Tables().Qualified(ms.Tables().Outbox)))
	var id int64
	if err := ms.DB().QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", "txbox-cleanup-"+hex.EncodeToString(sum[:16])).Scan(&id); err != nil {
		t.Fatalf("the cleanup lock's session: %v", err)
	}
	if _, err := ms.DB().ExecContext(ctx, "KILL ?", id); err != nil {
		t.Fatal(err)
	}
}
