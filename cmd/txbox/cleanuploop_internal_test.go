package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// Three relays that all run --cleanup-every clean the archive one at a
// time, and between them delete everything due. The checker learns who
// deleted when from a trigger of the test's own: the relays never write it.
func TestRelaysTakeTurnsAtCleanup(t *testing.T) {
	ctx := context.Background()
	dest := brokerenv.NATS{}.Setup(t)
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	tb := s.Tables()
	const n = 300
	if _, err := s.Pool().Exec(ctx, `INSERT INTO `+tb.Qualified(tb.Outbox)+` (event_id, aggregate_type, aggregate_id, event_type, payload)
		SELECT $1 || g, 'Order', 'o' || (g % 7), 'Created', '{}' FROM generate_series(1, $2::int) g`, txbox.NewID()[20:]+"-", n); err != nil {
		t.Fatal(err)
	}
	deletes := deleteLog(t, s.Pool(), tb.Qualified(tb.Outbox+"_sent"))

	var metrics []string
	for i := range 3 {
		addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		metrics = append(metrics, "http://"+addr+"/metrics")
		args := append([]string{"relay", "--db", testenv.URL(t, "TXBOX_TEST_POSTGRES"), "--broker", dest.URL, "--topic", dest.Topic,
			"--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox, "--relay-id", "r" + strconv.Itoa(i),
			"--cleanup-every", "1s", "--cleanup-older-than", "1ms", "--log-level", "debug", "--metrics-addr", addr}, dest.Args...)
		cmd := exec.Command(testenv.Binary(t), args...)
		cmd.Env = os.Environ()
		logs, exited := testenv.StartLogged(t, cmd)
		t.Cleanup(func() {
			testenv.StopProcess(cmd.Process, os.Interrupt, exited, 10*time.Second)
			if t.Failed() {
				t.Logf("relay r%d log:\n%s", i, logs.String())
			}
		})
	}
	var sessions map[int]bool
	testenv.WaitFor(t, 90*time.Second, "every event delivered and cleaned up, by cleanups of two relays or more, 8 deletes or more", func() bool {
		var left int
		if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM `+tb.Qualified(tb.Outbox)+`) + (SELECT count(*) FROM `+tb.Qualified(tb.Outbox+"_sent")+`)`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		stmts := deletes()
		sessions = map[int]bool{}
		for _, d := range stmts {
			sessions[d.pid] = true
		}
		return left == 0 && len(stmts) >= 8 && len(sessions) >= 2
	})
	if o := overlapping(deletes()); o != "" {
		t.Fatalf("two relays cleaned up at once: %s", o)
	}
	// Each row deleted is counted once, by the relay that deleted it.
	var deleted, done float64
	for _, m := range metrics {
		deleted += scrapeValue(t, m, "txbox_cleanup_deleted_rows_total", "table", "outbox")
		done += scrapeValue(t, m, "txbox_cleanup_runs_total", "result", "done")
	}
	if deleted != n || done < 2 {
		t.Fatalf("the relays' metrics: %v rows deleted (want %d), %v cleanups done (want 2 or more)", deleted, n, done)
	}
}

// scrapeValue is the value of the series of name with the label l = v at
// url.
func scrapeValue(t *testing.T, url, name, l, v string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range fams[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == l && lp.GetValue() == v {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("%s has no %s{%s=%q}", url, name, l, v)
	return 0
}

// Without the lock, the same checker sees cleanups meet: the sabotage the
// test above must be able to catch.
func TestCleanupCheckerCatchesUnlockedRelays(t *testing.T) {
	ctx := context.Background()
	s := storeenv.MigratedPostgres(t, postgres.Options{})
	tb := s.Tables()
	deletes := deleteLog(t, s.Pool(), tb.Qualified(tb.Outbox+"_sent"))
	turns := func(st store.Store) string {
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				c := cleanupLoop{every: time.Second, olderThan: time.Hour, log: slog.New(slog.DiscardHandler)}
				for range 3 {
					c.once(ctx, st)
				}
			})
		}
		wg.Wait()
		return overlapping(deletes())
	}
	if o := turns(s); o != "" {
		t.Fatalf("with the lock: %s", o)
	}
	if o := turns(unlocked{s}); o == "" {
		t.Fatalf("without the lock the checker saw no two cleanups meet in %d deletes", len(deletes()))
	}
}

// unlocked is a store whose cleanup lock is always free: the sabotage.
type unlocked struct{ *postgres.Store }

func (u unlocked) LockCleanup(context.Context) (store.Cleaner, bool, error) {
	return noLock{u.Store}, true, nil
}

type noLock struct{ *postgres.Store }

func (noLock) Unlock() {}

// deleteStmt is one DELETE on the archive: the session that ran it, from
// its statement's start to the trigger's end.
type deleteStmt struct {
	pid        int
	start, end time.Time
}

// deleteLog records every DELETE statement on table from now on, and makes
// each last 300 ms longer, so that two cleanups that could meet do; it
// returns what was recorded so far.
func deleteLog(t *testing.T, pool *pgxpool.Pool, table string) func() []deleteStmt {
	t.Helper()
	ctx := context.Background()
	name := "cleanup_log_" + txbox.NewID()[24:]
	for _, q := range []string{
		`CREATE TABLE ` + name + ` (pid int, started timestamptz, ended timestamptz)`,
		`CREATE FUNCTION ` + name + `_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			PERFORM pg_sleep(0.3);
			INSERT INTO ` + name + ` VALUES (pg_backend_pid(), statement_timestamp(), clock_timestamp());
			RETURN NULL; END $$`,
		`CREATE TRIGGER ` + name + ` AFTER DELETE ON ` + table + ` FOR EACH STATEMENT EXECUTE FUNCTION ` + name + `_fn()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{`DROP TRIGGER IF EXISTS ` + name + ` ON ` + table, `DROP FUNCTION IF EXISTS ` + name + `_fn()`, `DROP TABLE IF EXISTS ` + name} {
			_, _ = pool.Exec(context.Background(), q)
		}
	})
	return func() []deleteStmt {
		rows, err := pool.Query(ctx, `SELECT pid, started, ended FROM `+name+` ORDER BY started`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []deleteStmt
		for rows.Next() {
			var d deleteStmt
			if err := rows.Scan(&d.pid, &d.start, &d.end); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
}

// overlapping describes the first two statements of different sessions
// that ran at the same time; "" when none did.
func overlapping(stmts []deleteStmt) string {
	for i, a := range stmts {
		for _, b := range stmts[i+1:] {
			if a.pid != b.pid && b.start.Before(a.end) && a.start.Before(b.end) {
				return fmt.Sprintf("session %d deleted from %s to %s, session %d from %s to %s",
					a.pid, a.start.Format("15:04:05.000"), a.end.Format("15:04:05.000"), b.pid, b.start.Format("15:04:05.000"), b.end.Format("15:04:05.000"))
			}
		}
	}
	return ""
}
