package mysql_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/storetest"
)

// The driver's own log line about a connection the server ended reaches
// the logger of a store made by Open at debug level, not the standard
// logger's stderr.
func TestDriverLogGoesToTheStoreLogger(t *testing.T) {
	ctx := context.Background()
	var buf testenv.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := mysql.Open(ctx, storetest.URL(t, "TXBOX_TEST_MYSQL"), mysql.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	db.SetMaxIdleConns(1)
	var id int64
	if err := db.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("mysql", mustDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, `KILL CONNECTION ?`, id); err != nil {
		t.Fatal(err)
	}
	// The pool's idle connection is the killed one: using it makes the
	// driver log, then retry on a new connection.
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, "lib=go-sql-driver/mysql") || !strings.Contains(got, "level=DEBUG") {
		t.Fatalf("the driver's log line did not reach the store's logger at debug level; it got:\n%s", got)
	}
}
