package storeenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txbox/txbox/internal/testenv"
)

// ForcePrivateEnv, set to 1, makes LogicalPostgresURL use a private server
// even when the shared one could serve: how the CDC tests are run as on a
// machine whose PostgreSQL has wal_level = replica, without touching it.
const ForcePrivateEnv = "TXBOX_TEST_FORCE_PRIVATE_PG"

var logical struct {
	once   sync.Once
	shared string // the shared server's URL, when it has logical decoding
	whyNot string // otherwise, why not
	logged sync.Map
}

// LogicalPostgresURL is the URL of a PostgreSQL database with logical
// decoding, for the tests of CDC (store/postgres/cdc, `txbox relay --mode
// cdc`): the shared server (TXBOX_TEST_POSTGRES) when it runs wal_level =
// logical and takes replication connections, otherwise the test binary's
// own server (testenv.PrivatePostgres; the package's TestMain must run
// through testenv.RunPackage, which stops it). The choice is made once per
// test binary and logged once per top-level test. Without the PostgreSQL
// server binaries for a private server the test skips naming them, or
// fails under TXBOX_REQUIRE_SERVICES=1.
func LogicalPostgresURL(t testing.TB) string {
	t.Helper()
	logical.once.Do(func() { logical.shared, logical.whyNot = sharedLogical() })
	if logical.whyNot == "" {
		logOnce(t, "CDC tests: the shared PostgreSQL at %s (wal_level=logical)", hostOf(logical.shared))
		return logical.shared
	}
	u, port := testenv.PrivatePostgres(t, logical.whyNot)
	logOnce(t, "CDC tests: private PostgreSQL on port %d (%s)", port, logical.whyNot)
	return u
}

// logOnce logs on the first call of each top-level test: its subtests
// ask again and again.
func logOnce(t testing.TB, format string, args ...any) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	if _, seen := logical.logged.LoadOrStore(top, true); !seen {
		t.Logf(format, args...)
	}
}

// sharedLogical checks the shared server: its URL if logical decoding works
// there, or why it does not.
func sharedLogical() (shared, whyNot string) {
	if os.Getenv(ForcePrivateEnv) == "1" {
		return "", ForcePrivateEnv + "=1"
	}
	u := testenv.Setting("TXBOX_TEST_POSTGRES")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", fmt.Sprintf("the shared server at %s is unreachable: %v", hostOf(u), err)
	}
	defer conn.Close(ctx)
	var level, slots string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return "", fmt.Sprintf("the shared server's wal_level is unknown: %v", err)
	}
	if level != "logical" {
		return "", "the shared server runs wal_level=" + level
	}
	if err := conn.QueryRow(ctx, "SHOW max_replication_slots").Scan(&slots); err != nil || slots == "0" {
		return "", "the shared server allows no replication slots (max_replication_slots=" + slots + ")"
	}
	// A relay reads the log over a replication connection, which pg_hba.conf
	// and the role's REPLICATION attribute may refuse though wal_level is
	// right.
	cfg, err := pgconn.ParseConfig(u)
	if err != nil {
		return "", fmt.Sprintf("TXBOX_TEST_POSTGRES=%s: %v", u, err)
	}
	cfg.RuntimeParams["replication"] = "database"
	rc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Sprintf("the shared server refuses replication connections: %v", err)
	}
	defer rc.Close(ctx)
	if _, err := rc.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll(); err != nil {
		return "", fmt.Sprintf("the shared server's replication connection fails: %v", err)
	}
	return u, ""
}

// hostOf is the host:port of a database URL, without its user or password.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(TXBOX_TEST_POSTGRES)"
	}
	return u.Host
}
