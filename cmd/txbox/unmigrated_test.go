package main_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
)

// Every command that needs the tables says, in one line and with exit 2,
// that the database is not migrated and how to fix it, on every store.
func TestUnmigratedDatabaseSaysRunMigrate(t *testing.T) {
	table := "ob_unmig_" + strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	dbs := []string{
		testenv.URL(t, "TXBOX_TEST_POSTGRES"),
		testenv.URL(t, "TXBOX_TEST_MYSQL"),
		"sqlite://" + filepath.Join(t.TempDir(), "fresh.db"),
	}
	cmds := [][]string{
		{"relay", "--broker", "nats://127.0.0.1:4222"},
		{"stats"}, {"dead", "list"}, {"dead", "purge", "--all", "--yes"}, {"inbox", "list"}, {"cleanup", "--yes"},
	}
	want := "table " + table + " not found: run `txbox migrate --db ...` (or start the relay with --migrate)"
	for _, db := range dbs {
		for _, c := range cmds {
			args := append(append([]string{}, c...), "--db", db, "--outbox-table", table)
			out, code := run(t, nil, args...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(out, want) {
				t.Fatalf("txbox %v: exit %d, want 2 and one line %q; got:\n%s", args, code, want, out)
			}
		}
	}
}
