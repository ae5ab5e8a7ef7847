package inbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// TestMain turns this test binary into a consumer process when
// TXBOX_INBOX_CHILD is set, so tests can SIGKILL a real consumer.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if os.Getenv("TXBOX_INBOX_CHILD") == "1" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	g := os.Getenv
	s, err := postgres.Open(ctx, g("CHILD_PG"), postgres.Options{Tables: store.Tables{Outbox: g("CHILD_OUTBOX"), Inbox: g("CHILD_INBOX")}})
	if err != nil {
		return err
	}
	defer s.Close()
	sub, err := natsbroker.OpenSubscriber(ctx, g("CHILD_NATS"), natsbroker.SubscriberOptions{Stream: g("CHILD_STREAM"), Durable: g("CHILD_DURABLE"), AckWait: 2 * time.Second})
	if err != nil {
		return err
	}
	defer sub.Close()
	effects := g("CHILD_EFFECTS")
	c, err := inbox.New(s, inbox.Config{Name: g("CHILD_NAME"), Subscriber: sub, BatchSize: 100},
		func(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+effects+` (event_id, n) VALUES ($1, 1) ON CONFLICT (event_id) DO UPDATE SET n = `+effects+`.n + 1`, ev.ID)
			return err
		})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// startChild runs one consumer process; it is killed when the test ends.
func (e *env) startChild(name, durable string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	tb := e.s.Tables()
	cmd.Env = append(os.Environ(), "TXBOX_INBOX_CHILD=1",
		"CHILD_PG="+pgURL(e.t), "CHILD_OUTBOX="+tb.Outbox, "CHILD_INBOX="+tb.Inbox, "CHILD_NATS="+e.url,
		"CHILD_STREAM="+e.stream, "CHILD_DURABLE="+durable, "CHILD_NAME="+name, "CHILD_EFFECTS="+e.effects.Table)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if e.t.Failed() && out.Len() > 0 {
			e.t.Logf("consumer %s output:\n%s", name, out.String())
		}
	})
	return cmd
}

func (e *env) applied() (distinct, total int) {
	e.t.Helper()
	if err := e.s.Pool().QueryRow(context.Background(), `SELECT count(*), COALESCE(sum(n), 0) FROM `+e.effects.Table).Scan(&distinct, &total); err != nil {
		e.t.Fatal(err)
	}
	return distinct, total
}

func (e *env) assertExactlyOnce(want int) {
	e.t.Helper()
	rows, err := e.s.Pool().Query(context.Background(), `SELECT event_id, n FROM `+e.effects.Table+` WHERE n <> 1 LIMIT 5`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		_ = rows.Scan(&id, &n)
		e.t.Errorf("DOUBLE EFFECT: event %s applied %d times", id, n)
	}
	if d, _ := e.applied(); d != want {
		e.t.Fatalf("%d distinct effects, want %d", d, want)
	}
}

func TestConsumerSIGKILLedDuring10kRun(t *testing.T) {
	e := newEnv(t)
	const n = 10000
	evs := testenv.Backlog(n, 200, "OrderCreated")
	for i := 0; i < n; i += 2000 {
		e.write(evs[i : i+2000]...)
	}
	e.relay()
	kills := 0
	for kills < 4 {
		// Killed once it has applied something (a loaded machine may take
		// seconds to start it), a little later each time.
		before, _ := e.applied()
		p := e.startChild("inventory", "inventory")
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if d, _ := e.applied(); d > before {
				break
			}
		}
		time.Sleep(time.Duration(50+kills*100) * time.Millisecond)
		_ = p.Process.Signal(syscall.SIGKILL)
		_, _ = p.Process.Wait()
		kills++
		if d, _ := e.applied(); d >= n {
			break
		}
	}
	d, _ := e.applied()
	t.Logf("killed the consumer %d times; %d of %d events applied before the final run", kills, d, n)
	if d == 0 || d >= n {
		t.Fatalf("kills did not land mid-run (%d applied)", d)
	}
	e.startChild("inventory", "inventory")
	waitProgress(t, "every event applied", 60*time.Second, 10*time.Minute, n, func() int { d, _ := e.applied(); return d })
	time.Sleep(2500 * time.Millisecond) // past the ack wait: late redeliveries must be absorbed too
	e.assertExactlyOnce(n)
}

func TestTwoProcessesShareOneDurableConsumer(t *testing.T) {
	e := newEnv(t)
	const n = 4000
	evs := testenv.Backlog(n, 100, "OrderCreated")
	e.write(evs...)
	e.relay()
	e.startChild("inventory", "inventory")
	e.startChild("inventory", "inventory")
	waitProgress(t, "every event applied", 60*time.Second, 10*time.Minute, n, func() int { d, _ := e.applied(); return d })
	time.Sleep(2500 * time.Millisecond)
	e.assertExactlyOnce(n)
	ic, err := e.s.InboxCounts(context.Background())
	if err != nil || ic["inventory"][txbox.StatusProcessed] != n {
		t.Fatalf("inbox rows: %v %v", ic, err)
	}
}
