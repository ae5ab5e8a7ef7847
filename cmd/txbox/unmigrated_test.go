package main_test

import (
	"os"
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
	// An empty file is an empty SQLite database (a missing one is refused
	// before the tables are looked for: TestMissingSQLiteFileIsNotCreated).
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dbs := []string{
		testenv.URL(t, "TXBOX_TEST_POSTGRES"),
		testenv.URL(t, "TXBOX_TEST_MYSQL"),
		"sqlite://" + fresh,
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

// A command that does not create the tables does not create a missing
// SQLite file either (a mistyped path would leave an empty database
// behind it): exit 2, naming the file and `txbox migrate`. migrate does.
func TestMissingSQLiteFileIsNotCreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	db := "sqlite://" + path
	for _, c := range [][]string{
		{"stats"}, {"dead", "list"}, {"dead", "purge", "--all", "--yes"}, {"inbox", "list"}, {"cleanup", "--yes"},
		{"relay", "--broker", "nats://127.0.0.1:1", "--fail-fast"}, {"ui", "--addr", "127.0.0.1:0"},
	} {
		args := append(append([]string{}, c...), "--db", db)
		out, code := run(t, nil, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, "SQLite file "+path+" does not exist") || !strings.Contains(out, "txbox migrate") {
			t.Fatalf("txbox %v: exit %d, want 2 and one line saying the file does not exist; got:\n%s", args, code, out)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("txbox %v created %s: %v", args, path, err)
		}
	}
	if out, code := run(t, nil, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	if out, code := run(t, nil, "stats", "--db", db); code != 0 {
		t.Fatalf("stats after migrate: exit %d\n%s", code, out)
	}
}
