package main_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// `dead list` lists newest first, as the console does, says on stderr when
// --limit cut rows and how many match in all, and filters by --error like
// the console; `dead show` takes the id as argument or --event-id, as the
// README groups it.
func TestDeadListAndShowLikeTheConsole(t *testing.T) {
	_, flags, conn, outbox := cliTables(t)
	ids := insertDead(t, conn, outbox, "boom one", "other two", "BOOM three", "other four", "boom five")
	with := func(args ...string) []string { return append(args, flags...) }

	out, code := run(t, nil, with("dead", "list", "--limit", "3")...)
	if code != 0 {
		t.Fatalf("dead list --limit 3: exit %d\n%s", code, out)
	}
	for i, id := range []string{ids[4], ids[3], ids[2]} {
		at := strings.Index(out, id)
		if at < 0 {
			t.Fatalf("dead list --limit 3 lacks row %d (%s), want the newest three, newest first:\n%s", i, id, out)
		}
		if i > 0 && at < strings.Index(out, []string{ids[4], ids[3]}[i-1]) {
			t.Fatalf("dead list is not newest first:\n%s", out)
		}
	}
	if strings.Contains(out, ids[1]) || strings.Contains(out, ids[0]) {
		t.Fatalf("dead list --limit 3 shows more than three rows:\n%s", out)
	}
	if !strings.Contains(out, "showing the newest 3 of 5 matching dead events") {
		t.Fatalf("dead list --limit 3 of 5 does not say rows were cut:\n%s", out)
	}
	out, code = run(t, nil, with("dead", "list")...)
	if code != 0 || strings.Contains(out, "showing the newest") {
		t.Fatalf("dead list of all rows: exit %d, or a note although nothing was cut:\n%s", code, out)
	}

	out, code = run(t, nil, with("dead", "list", "--error", "boom", "--json")...)
	var rows []struct {
		EventID   string `json:"event_id"`
		LastError string `json:"last_error"`
	}
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("dead list --error boom --json: exit %d %v\n%s", code, err, out)
	}
	if len(rows) != 3 || rows[0].EventID != ids[4] || rows[1].EventID != ids[2] || rows[2].EventID != ids[0] {
		t.Fatalf("dead list --error boom: %+v, want the three boom rows, newest first", rows)
	}

	for _, args := range [][]string{{"dead", "show", ids[1]}, {"dead", "show", "--event-id", ids[1]}} {
		out, code := run(t, nil, with(args...)...)
		if code != 0 || !strings.Contains(out, `"event_id": "`+ids[1]+`"`) || !strings.Contains(out, "other two") {
			t.Fatalf("txbox %v: exit %d\n%s", args, code, out)
		}
	}
	if out, code := run(t, nil, with("dead", "show")...); code != 2 || !strings.Contains(out, "--event-id") {
		t.Fatalf("dead show without an id: exit %d, want 2 naming --event-id\n%s", code, out)
	}
	if out, code := run(t, nil, with("dead", "show", "--event-id", "nosuch")...); code != 1 {
		t.Fatalf("dead show --event-id nosuch: exit %d, want 1\n%s", code, out)
	}
}

// A replay or purge whose filter matches nothing fails (exit 1) with a
// message, as `dead show` of a missing id does, dry run or not; --error
// selects rows for them as for the list.
func TestDeadReplayMatchingNothingFails(t *testing.T) {
	_, flags, conn, outbox := cliTables(t)
	insertDead(t, conn, outbox, "boom one", "other two", "boom three")
	with := func(args ...string) []string { return append(args, flags...) }
	for _, args := range [][]string{
		{"dead", "replay", "--event-type", "Nope"},
		{"dead", "replay", "--event-type", "Nope", "--yes"},
		{"dead", "purge", "--aggregate-id", "nobody", "--dry-run"},
		{"dead", "purge", "--error", "no such text", "--yes"},
	} {
		out, code := run(t, nil, with(args...)...)
		if code != 1 || !strings.Contains(out, "no dead event matches the filter") {
			t.Fatalf("txbox %v: exit %d, want 1 and a message\n%s", args, code, out)
		}
	}
	if n := countDead(t, conn, outbox); n != 3 {
		t.Fatalf("%d dead rows left, want 3", n)
	}
	out, code := run(t, nil, with("dead", "replay", "--error", "BOOM", "--yes")...)
	if code != 0 || !strings.Contains(out, "replayed 2 dead event(s)") || countDead(t, conn, outbox) != 1 {
		t.Fatalf("dead replay --error BOOM: exit %d, %d dead left\n%s", code, countDead(t, conn, outbox), out)
	}
}
