package main_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
)

// cliTables migrates fresh tables on the test PostgreSQL through the CLI and
// returns the flags naming them and a connection, both cleaned up.
func cliTables(t *testing.T) (db string, flags []string, conn *pgx.Conn, outbox string) {
	t.Helper()
	return cliTablesAt(t, testenv.URL(t, "TXBOX_TEST_POSTGRES"))
}

// cliTablesAt is cliTables on the database db.
func cliTablesAt(t *testing.T, db string) (_ string, flags []string, conn *pgx.Conn, outbox string) {
	t.Helper()
	sfx := strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	outbox, inbox := "ob_cli_"+sfx, "ib_cli_"+sfx
	flags = []string{"--db", db, "--outbox-table", outbox, "--inbox-table", inbox}
	if out, code := run(t, nil, append([]string{"migrate"}, flags...)...); code != 0 {
		t.Fatalf("migrate: %d %s", code, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{outbox, outbox + "_sent", outbox + "_migrations", inbox, inbox + "_versions"} {
			_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+tb)
		}
		conn.Close(ctx)
	})
	return db, flags, conn, outbox
}

// insertDead writes DEAD rows as a relay that gave up would leave them.
func insertDead(t *testing.T, conn *pgx.Conn, outbox string, lastErrors ...string) []string {
	t.Helper()
	var ids []string
	for _, e := range lastErrors {
		id := txbox.NewID()
		if _, err := conn.Exec(context.Background(), `INSERT INTO `+outbox+` (event_id, aggregate_type, aggregate_id, event_type, payload, status, retry_count, last_error)
			VALUES ($1, 'Order', 'o-1', 'OrderPlaced', '{}', 'DEAD', 3, $2)`, id, e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// insertParked writes a DEAD inbox row of consumer inventory, as a
// consumer that gave up on the event would leave it.
func insertParked(t *testing.T, conn *pgx.Conn, inbox, eventID, lastError string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), `INSERT INTO `+inbox+` (event_id, consumer_name, event_type, status, retry_count, error_message)
		VALUES ($1, 'inventory', 'OrderPlaced', 'DEAD', 5, $2)`, eventID, lastError); err != nil {
		t.Fatal(err)
	}
}

func countDead(t *testing.T, conn *pgx.Conn, outbox string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM `+outbox+` WHERE status = 'DEAD'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// onTerminal runs the binary on a pseudo-terminal (script(1)) with answer
// typed at it.
func onTerminal(t *testing.T, answer string, args ...string) (string, int) {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		testenv.Missing(t, "script(1) for a pseudo-terminal")
	}
	quoted := []string{testenv.Binary(t)}
	for _, a := range args {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	cmd := exec.Command("script", "-qec", strings.Join(quoted, " "), "/dev/null")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TERM=dumb"}
	cmd.Stdin = strings.NewReader(answer)
	out, err := cmd.CombinedOutput()
	return string(out), exitCode(t, err)
}

// Destructive commands: --dry-run shows exact counts and changes nothing;
// more than one row asks on a terminal and needs --yes elsewhere; --yes
// goes ahead.
func TestDestructiveCommandsDryRunConfirmYes(t *testing.T) {
	_, flags, conn, outbox := cliTables(t)
	insertDead(t, conn, outbox, "a", "b", "c")
	with := func(args ...string) []string { return append(args, flags...) }

	for _, c := range []struct {
		args []string
		want string
	}{
		{with("dead", "purge", "--all", "--dry-run"), "dry run: would purge 3 dead event(s)"},
		{with("dead", "replay", "--aggregate-id", "o-1", "--dry-run"), "dry run: would replay 3 dead event(s)"},
		{with("cleanup", "--dry-run"), "dry run: would delete 0 sent outbox row(s) older than 168h0m0s and 0 processed inbox row(s)"},
	} {
		out, code := run(t, nil, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Fatalf("txbox %v: exit %d, want %q in:\n%s", c.args, code, c.want, out)
		}
	}
	if n := countDead(t, conn, outbox); n != 3 {
		t.Fatalf("a dry run changed rows: %d dead left", n)
	}

	// Not a terminal: no one to ask.
	out, code := run(t, nil, with("dead", "purge", "--all")...)
	if code != 2 || !strings.Contains(out, "--yes") || countDead(t, conn, outbox) != 3 {
		t.Fatalf("purge of 3 rows without --yes off a terminal: exit %d\n%s", code, out)
	}
	// A terminal, answered no, then yes.
	out, code = onTerminal(t, "n\n", with("dead", "purge", "--all")...)
	if code != 1 || !strings.Contains(out, "Purge 3 dead event(s)? [y/N]") || countDead(t, conn, outbox) != 3 {
		t.Fatalf("purge answered no: exit %d\n%s", code, out)
	}
	out, code = onTerminal(t, "y\n", with("dead", "replay", "--all")...)
	if code != 0 || !strings.Contains(out, "replayed 3 dead event(s)") || countDead(t, conn, outbox) != 0 {
		t.Fatalf("replay answered yes: exit %d\n%s", code, out)
	}
	// --yes in a script; one row needs no confirmation.
	one := insertDead(t, conn, outbox, "d", "e", "f")
	out, code = run(t, nil, with("dead", "purge", "--event-id", one[0])...)
	if code != 0 || !strings.Contains(out, "purged 1 dead event(s)") {
		t.Fatalf("purge of one row: exit %d\n%s", code, out)
	}
	out, code = run(t, nil, with("dead", "purge", "--all", "--yes")...)
	if code != 0 || !strings.Contains(out, "purged 2 dead event(s)") || countDead(t, conn, outbox) != 0 {
		t.Fatalf("purge with --yes: exit %d\n%s", code, out)
	}
}
