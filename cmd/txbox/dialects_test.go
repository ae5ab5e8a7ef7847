package main_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/mysql"
)

// The admin commands work on SQLite and MySQL/MariaDB as on PostgreSQL:
// migrate (twice: idempotent), stats, dead list, inbox list, cleanup.
func TestAdminCommandsOnEveryDialect(t *testing.T) {
	sfx := strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	tables := []string{"--outbox-table", "ob_cli_" + sfx, "--inbox-table", "ib_cli_" + sfx}
	mysqlURL := testenv.URL(t, "TXBOX_TEST_MYSQL")
	t.Cleanup(func() {
		dsn, err := mysql.DSN(mysqlURL)
		if err != nil {
			return
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return
		}
		defer db.Close()
		for _, tb := range []string{"ob_cli_" + sfx, "ob_cli_" + sfx + "_sent", "ob_cli_" + sfx + "_migrations", "ib_cli_" + sfx, "ib_cli_" + sfx + "_versions"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	for _, db := range []string{"sqlite://" + filepath.Join(t.TempDir(), "cli.db"), mysqlURL} {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"migrate"}, "migrations applied"},
			{[]string{"migrate"}, "migrations applied"},
			{[]string{"stats", "--json"}, `"backlog": 0`},
			{[]string{"dead", "list"}, "EVENT_ID"},
			{[]string{"inbox", "list"}, "CONSUMER"},
			{[]string{"cleanup"}, "inbox: deleted 0"},
		} {
			args := append(append(append([]string{}, c.args...), "--db", db), tables...)
			out, code := run(t, nil, args...)
			if code != 0 || !strings.Contains(out, c.want) {
				t.Fatalf("txbox %v: exit %d, want %q in:\n%s", args, code, c.want, out)
			}
		}
	}
}
