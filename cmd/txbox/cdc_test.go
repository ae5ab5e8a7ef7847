package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
)

// TestMain stops the private PostgreSQL the CDC tests may have shared (when
// the shared server lacks logical decoding) once every test ran.
func TestMain(m *testing.M) { os.Exit(testenv.RunPackage(m)) }

// cdcTables is cliTables on a database with logical decoding: the shared
// server when it has it, else the package's private one.
func cdcTables(t *testing.T) (db string, flags []string, conn *pgx.Conn, outbox string) {
	t.Helper()
	return cliTablesAt(t, storeenv.LogicalPostgresURL(t))
}

// cdcSlot names the replication slot of cdcTables' outbox and, when the
// test ends, drops it (unless a relay still reads it), the publication and
// the slots table that migrate --cdc makes.
func cdcSlot(t *testing.T, conn *pgx.Conn, outbox string) string {
	slot := "txbox_cli_" + strings.TrimPrefix(outbox, "ob_cli_")
	ctx := context.Background()
	t.Cleanup(func() {
		_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot)
		_, _ = conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+outbox+"_cdc")
		_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+outbox+"_cdc_slots")
	})
	return slot
}

// --mode cdc is checked before anything connects: one line naming the
// flag, exit 2.
func TestCDCFlagsValidated(t *testing.T) {
	pg := "postgres://u:hunter2@127.0.0.1:1/x"
	for _, c := range []struct {
		args  []string
		names string
	}{
		{[]string{"relay", "--db", "sqlite:///tmp/x.db", "--broker", "nats://127.0.0.1:1", "--mode", "cdc", "--slot", "s1"}, "--mode (TXBOX_MODE)"},
		{[]string{"relay", "--db", "mysql://root@127.0.0.1:1/x", "--broker", "nats://127.0.0.1:1", "--mode", "cdc", "--slot", "s1"}, "--mode (TXBOX_MODE)"},
		{[]string{"relay", "--db", pg, "--broker", "nats://127.0.0.1:1", "--mode", "wal"}, "--mode (TXBOX_MODE)"},
		{[]string{"relay", "--db", pg, "--broker", "nats://127.0.0.1:1", "--mode", "cdc"}, "--slot (TXBOX_SLOT)"},
		{[]string{"relay", "--db", pg, "--broker", "nats://127.0.0.1:1", "--mode", "cdc", "--slot", "Bad-Name"}, "--slot (TXBOX_SLOT)"},
		{[]string{"relay", "--db", pg, "--broker", "nats://127.0.0.1:1", "--slot", "s1"}, "--slot (TXBOX_SLOT)"},
		{[]string{"relay", "--db", pg, "--broker", "nats://127.0.0.1:1", "--mode", "cdc", "--slot", "s1", "--wakeup", "listen"}, "--wakeup (TXBOX_WAKEUP)"},
		{[]string{"migrate", "--db", "sqlite:///tmp/x.db", "--cdc"}, "--cdc (TXBOX_CDC)"},
		{[]string{"migrate", "--db", pg, "--slot", "s1"}, "--slot (TXBOX_SLOT)"},
		{[]string{"cdc", "drop-slot", "Bad-Name", "--db", pg}, "--slot (TXBOX_SLOT)"},
	} {
		out, code := run(t, nil, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, c.names) {
			t.Errorf("txbox %v: exit %d, want 2 and one line naming %s; got:\n%s", c.args, code, c.names, out)
		}
		if strings.Contains(out, "hunter2") {
			t.Errorf("password printed: %s", out)
		}
	}
}

// migrate --cdc --slot makes the publication and the slot; stats lists the
// slot with its lag once events wait in it; cdc drop-slot looks with
// --dry-run, refuses without --yes when no one can be asked, and drops with
// it.
func TestCDCMigrateStatsDropSlot(t *testing.T) {
	_, flags, conn, outbox := cdcTables(t)
	slot := cdcSlot(t, conn, outbox)
	ctx := context.Background()
	out, code := run(t, nil, append([]string{"migrate", "--cdc", "--slot", slot}, flags...)...)
	if code != 0 || !strings.Contains(out, "publication "+outbox+"_cdc ready") || !strings.Contains(out, "replication slot "+slot+" created") {
		t.Fatalf("migrate --cdc: exit %d\n%s", code, out)
	}
	// Idempotent.
	if out, code := run(t, nil, append([]string{"migrate", "--cdc", "--slot", slot}, flags...)...); code != 0 || !strings.Contains(out, "exists") {
		t.Fatalf("migrate --cdc again: exit %d\n%s", code, out)
	}
	// Events the slot holds and no relay reads.
	for range 20 {
		if _, err := conn.Exec(ctx, `INSERT INTO `+outbox+` (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES (gen_random_uuid()::text, 'Order', 'o-1', 'OrderPlaced', '{"pad":"`+strings.Repeat("x", 500)+`"}')`); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	out, code = run(t, nil, append([]string{"stats", "--json"}, flags...)...)
	if code != 0 {
		t.Fatalf("stats: %d\n%s", code, out)
	}
	var js struct {
		Slots []struct {
			Slot    string  `json:"slot"`
			Exists  bool    `json:"exists"`
			Active  bool    `json:"active"`
			Bytes   int64   `json:"lag_bytes"`
			Seconds float64 `json:"lag_seconds"`
		} `json:"cdc_slots"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(js.Slots) != 1 || js.Slots[0].Slot != slot || !js.Slots[0].Exists || js.Slots[0].Active || js.Slots[0].Bytes < 10000 || js.Slots[0].Seconds < 1 {
		t.Fatalf("stats cdc_slots: %+v, want %s inactive with its lag", js.Slots, slot)
	}
	if out, _ := run(t, nil, append([]string{"stats"}, flags...)...); !strings.Contains(out, slot) || !strings.Contains(out, "inactive") {
		t.Fatalf("stats text does not list the slot:\n%s", out)
	}

	drop := append([]string{"cdc", "drop-slot", slot}, flags...)
	out, code = run(t, nil, append(drop, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "dry run: would drop replication slot "+slot) {
		t.Fatalf("drop-slot --dry-run: exit %d\n%s", code, out)
	}
	if !slotExists(t, conn, slot) {
		t.Fatal("--dry-run dropped the slot")
	}
	out, code = run(t, nil, drop...)
	if code != 2 || !strings.Contains(out, "--yes") || !slotExists(t, conn, slot) {
		t.Fatalf("drop-slot without --yes and no terminal: exit %d, slot kept %v\n%s", code, slotExists(t, conn, slot), out)
	}
	out, code = run(t, nil, append(drop, "--yes")...)
	if code != 0 || !strings.Contains(out, "dropped replication slot "+slot) || slotExists(t, conn, slot) {
		t.Fatalf("drop-slot --yes: exit %d\n%s", code, out)
	}
	if out, code := run(t, nil, append(drop, "--yes")...); code != 1 || !strings.Contains(out, "does not exist") {
		t.Fatalf("drop-slot of a missing slot: exit %d\n%s", code, out)
	}
}

func slotExists(t *testing.T, conn *pgx.Conn, slot string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A relay in --mode cdc logs a progress line while it publishes and its
// counts when it stops; while it reads its slot, `cdc drop-slot --dry-run`
// says the slot is active and exits 1, as the drop itself does.
func TestCDCRelayProgressAndActiveSlot(t *testing.T) {
	_, flags, conn, outbox := cdcTables(t)
	slot := cdcSlot(t, conn, outbox)
	ctx := context.Background()
	if out, code := run(t, nil, append([]string{"migrate", "--cdc", "--slot", slot}, flags...)...); code != 0 {
		t.Fatalf("migrate --cdc: exit %d\n%s", code, out)
	}
	nats := testenv.StartNATS(t)
	relay := exec.Command(testenv.Binary(t), append([]string{"relay", "--mode", "cdc", "--slot", slot, "--broker", nats.URL, "--nats-create-stream"}, flags...)...)
	relay.Env = []string{"PATH=/usr/bin:/bin"}
	var log testenv.SyncBuffer
	relay.Stdout, relay.Stderr = &log, &log
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = relay.Process.Kill()
			_ = relay.Wait()
		}
	})
	waitLog := func(what string, d time.Duration, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok(log.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %v:\n%s", what, d, log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitLog("reading of the slot", 60*time.Second, func(s string) bool { return strings.Contains(s, "reading the slot") })
	for range 20 {
		if _, err := conn.Exec(ctx, `INSERT INTO `+outbox+` (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES (gen_random_uuid()::text, 'Order', 'o-1', 'OrderPlaced', '{}')`); err != nil {
			t.Fatal(err)
		}
	}

	drop := append([]string{"cdc", "drop-slot", slot}, flags...)
	for _, extra := range [][]string{{"--dry-run"}, {"--yes"}} {
		out, code := run(t, nil, append(drop, extra...)...)
		if code != 1 || !strings.Contains(out, "replication slot "+slot+" is active: stop its relay first") || strings.Contains(out, "would drop") {
			t.Fatalf("drop-slot %v of an active slot: exit %d, want 1 saying it is active\n%s", extra, code, out)
		}
	}
	if !slotExists(t, conn, slot) {
		t.Fatal("the active slot was dropped")
	}

	progress := regexp.MustCompile(`msg="relay progress" .*published=20 rate_per_s=(\d+) publishing=(\S+) window=\S+ .*dead_marked=0`)
	waitLog("progress line", 40*time.Second, progress.MatchString)
	m := progress.FindStringSubmatch(log.String())
	busy, err := time.ParseDuration(m[2])
	if err != nil || busy <= 0 || busy > 5*time.Second {
		t.Fatalf("progress line: publishing=%s, want the seconds spent publishing, not the window:\n%s", m[2], log.String())
	}
	if rate, _ := strconv.Atoi(m[1]); rate < 4 {
		t.Fatalf("progress line: rate_per_s=%d over %v publishing, want 20 events over the time spent publishing:\n%s", rate, busy, log.String())
	}
	if err := relay.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = relay.Wait()
	stopped = true
	if err != nil || !strings.Contains(log.String(), `msg="relay stopped" mode=cdc published=20 dead_marked=0`) {
		t.Fatalf("relay stop: %v, want a stop line with the counts:\n%s", err, log.String())
	}
}
