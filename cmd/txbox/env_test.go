package main_test

import (
	"strings"
	"testing"
)

// --yes and --all are read from the command line only: TXBOX_ALL and
// TXBOX_YES left in an environment do not turn a bare `dead purge` into a
// purge of every dead row, nor confirm one; each is named in a warning.
func TestSafetySwitchesAreFlagsOnly(t *testing.T) {
	_, flags, conn, outbox := cliTables(t)
	insertDead(t, conn, outbox, "a", "b", "c")
	with := func(args ...string) []string { return append(args, flags...) }
	env := []string{"TXBOX_ALL=true", "TXBOX_YES=1"}

	out, code := run(t, env, with("dead", "purge")...)
	if code != 2 || !strings.Contains(out, "--all") || countDead(t, conn, outbox) != 3 {
		t.Fatalf("dead purge with TXBOX_ALL and TXBOX_YES set: exit %d, %d dead left, want 2 and 3:\n%s", code, countDead(t, conn, outbox), out)
	}
	for _, name := range []string{"TXBOX_ALL", "TXBOX_YES"} {
		if !strings.Contains(out, "ignoring environment variable "+name) {
			t.Fatalf("no warning about %s:\n%s", name, out)
		}
	}
	out, code = run(t, env, with("dead", "replay", "--all")...)
	if code != 2 || !strings.Contains(out, "give --yes") || countDead(t, conn, outbox) != 3 {
		t.Fatalf("dead replay --all with TXBOX_YES set, off a terminal: exit %d, %d dead left, want 2 and 3:\n%s", code, countDead(t, conn, outbox), out)
	}
	out, code = run(t, nil, "dead", "purge", "--help")
	if code != 0 || strings.Contains(out, "TXBOX_YES") || strings.Contains(out, "TXBOX_ALL") || !strings.Contains(out, "command line only") {
		t.Fatalf("dead purge --help offers a variable for --yes or --all:\n%s", out)
	}
}

// A TXBOX_* variable no flag reads is one warning line naming the closest
// one; variables of other commands' flags and of the test harnesses are
// not warned about.
func TestUnknownVariableWarns(t *testing.T) {
	for _, c := range []struct {
		env  string
		want string
	}{
		{"TXBOX_BATCHSIZE=5", "(did you mean TXBOX_BATCH_SIZE?)"},
		{"TXBOX_WORKER=4", "(did you mean TXBOX_WORKERS?)"},
		{"TXBOX_NOTHING_LIKE_IT=1", "ignoring unknown environment variable TXBOX_NOTHING_LIKE_IT"},
	} {
		out, code := run(t, []string{c.env, "TXBOX_BROKER=nats://127.0.0.1:1", "TXBOX_TEST_POSTGRES=postgres://x"}, "version")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], c.want) {
			t.Fatalf("txbox version with %s: exit %d, want 0, one warning with %q and the version:\n%s", c.env, code, c.want, out)
		}
	}
	out, code := run(t, []string{"TXBOX_BROKER=nats://127.0.0.1:1", "TXBOX_SLOT=s1", "TXBOX_TEST_POSTGRES=postgres://x", "TXBOX_CPUPROFILE="}, "version")
	if code != 0 || strings.Contains(out, "WARN") {
		t.Fatalf("known variables warned about: exit %d\n%s", code, out)
	}
}
