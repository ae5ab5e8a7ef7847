package main_test

import (
	"strings"
	"testing"

	"github.com/txbox/txbox"
)

// --status is validated and case-insensitive; a replay for a consumer with
// no rows says so (exit 1) instead of "0 parked event(s)".
func TestInboxStatusFilterAndUnknownConsumer(t *testing.T) {
	_, flags, conn, _ := cliTables(t)
	inbox := flags[len(flags)-1]
	id := txbox.NewID()
	insertParked(t, conn, inbox, id, "boom")
	with := func(args ...string) []string { return append(args, flags...) }
	for _, st := range []string{"dead", "Dead", "DEAD", "all", ""} {
		out, code := run(t, nil, with("inbox", "list", "--status", st)...)
		if code != 0 || !strings.Contains(out, id) {
			t.Fatalf("inbox list --status %q: exit %d, row missing:\n%s", st, code, out)
		}
	}
	if out, code := run(t, nil, with("inbox", "list", "--status", "retry")...); code != 0 || strings.Contains(out, id) {
		t.Fatalf("inbox list --status retry: exit %d\n%s", code, out)
	}
	out, code := run(t, nil, with("inbox", "list", "--status", "BOGUS")...)
	if code != 2 || !strings.Contains(out, "--status (TXBOX_STATUS)") || !strings.Contains(out, "DEAD, RETRY, REPLAY") {
		t.Fatalf("inbox list --status BOGUS: exit %d\n%s", code, out)
	}
	out, code = run(t, nil, with("inbox", "replay", "--consumer", "Inventory", "--all")...)
	if code != 1 || !strings.Contains(out, `consumer "Inventory" has no inbox rows`) || !strings.Contains(out, "consumers with rows: inventory") {
		t.Fatalf("replay for an unknown consumer: exit %d\n%s", code, out)
	}
	out, code = run(t, nil, with("inbox", "replay", "--consumer", "inventory", "--all")...)
	if code != 0 || !strings.Contains(out, "replay requested for 1 parked event(s)") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
}
