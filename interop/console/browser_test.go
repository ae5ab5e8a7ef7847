package console

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/storetest"
)

// harness is a store of one dialect, with the *sql.DB its inbox is
// reached through.
type harness interface {
	storetest.Harness
	SQLDB(t *testing.T, s store.Store) *sql.DB
}

// An operator's night in a real browser, on PostgreSQL and SQLite: the
// overview shows the backlog the test wrote; a dead event is opened,
// replayed, and the relay delivers it; a parked inbox event is opened,
// replayed, and the consumer applies it.
//
// TXBOX_CONSOLE_SCREENSHOTS=DIR writes the pages' screenshots there (the
// ones in docs/ come from this).
func TestBrowser(t *testing.T) {
	chrome := chromium(t)
	t.Run("postgres", func(t *testing.T) { operatorNight(t, storeenv.Postgres{}, chrome) })
	t.Run("sqlite", func(t *testing.T) { operatorNight(t, storeenv.SQLite{}, chrome) })
}

// chromium finds the browser; missing, it skips, or fails in CI.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "Chromium (apt-get install chromium)")
	return ""
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func operatorNight(t *testing.T, h harness, chrome string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := h.Open(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// A dead event (the broker refused it), a backlog of three, and an
	// event the billing consumer parked.
	dead := txbox.MustEvent("Order", "order-7", "OrderPlaced", map[string]any{"order": 7, "items": []string{"book", "pen"}})
	storeenv.Write(t, h, s, dead)
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "relay-a#1", Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(recs) != 1 {
		t.Fatalf("claim: %v %d", err, len(recs))
	}
	if _, err := s.MarkFailed(ctx, "relay-a#1", []store.Failure{{ID: recs[0].ID, Error: "broker: subject outbox.Order.OrderPlaced not allowed", Dead: true}}); err != nil {
		t.Fatal(err)
	}
	var backlog []txbox.Event
	for _, id := range []string{"order-1", "order-2", "order-3"} {
		backlog = append(backlog, txbox.MustEvent("Order", id, "OrderPlaced", map[string]any{"order": id}))
	}
	storeenv.Write(t, h, s, backlog...)
	parked := txbox.MustEvent("Invoice", "inv-9", "InvoiceIssued", map[string]any{"invoice": 9, "amount": "12.50"})
	storetest.InTx(t, h, s, func(tx store.Tx) error {
		_, _, err := s.(interface{ InboxDialect() store.InboxDialect }).InboxDialect().InboxFail(ctx, tx, "billing", parked, "handler: ledger account 4711 closed", 1, txbox.StatusRetry)
		return err
	})

	c, err := console.New(s, console.Options{Database: s.Dialect().Name() + " (test)", Logger: quiet(), SampleEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	go func() { _ = c.Run(ctx) }()

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1100, 760))...)
	defer cancelAlloc()
	b, cancelB := chromedp.NewContext(alloc)
	defer cancelB()
	br := &browser{t: t, ctx: b}
	shot := func(name string) {
		t.Helper()
		dir := os.Getenv("TXBOX_CONSOLE_SCREENSHOTS")
		if dir == "" || s.Dialect().Name() != "postgres" {
			return
		}
		png, err := chromedp.Run(b, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The overview shows the backlog the test wrote.
	br.do("overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#backlog")))
	if got, dead := br.text("#backlog .n"), br.text("#dead"); got != "3" || dead != "1" {
		t.Fatalf("overview shows backlog %q dead %q, want 3 and 1", got, dead)
	}

	// The relay starts and drains the backlog.
	mb := membroker.New(membroker.Options{})
	r, err := relay.New(relay.Config{Store: s, Publisher: mb, PollInterval: 50 * time.Millisecond, ID: "relay-b", Claims: "lease", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Run(ctx) }()
	waitFor(t, "backlog delivered", func() bool {
		return published(mb, backlog[0].ID) && published(mb, backlog[1].ID) && published(mb, backlog[2].ID)
	})
	time.Sleep(1100 * time.Millisecond) // one more sample for the chart
	br.do("overview again", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#backlog")))
	if got := br.text("#backlog .n"); got != "0" {
		t.Fatalf("overview after the relay ran shows backlog %q, want 0", got)
	}
	shot("console-overview.png")

	// Open the dead event, replay it, and see the relay deliver it.
	br.do("dead list", chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("#dead-rows")))
	shot("console-dead.png")
	br.do("open dead event", chromedp.Click(chromedp.CSS("#dead-rows a.event")), chromedp.WaitVisible(chromedp.CSS("#event-id")))
	if got := br.text("#event-id"); got != dead.ID {
		t.Fatalf("details show %q, want %q", got, dead.ID)
	}
	if p := br.text("#payload"); !strings.Contains(p, `"items": [`) {
		t.Fatalf("payload not pretty-printed: %q", p)
	}
	shot("console-dead-event.png")
	br.do("replay", chromedp.Click(chromedp.CSS("#replay")), chromedp.WaitVisible(chromedp.CSS("#done")))
	waitFor(t, "replayed event delivered", func() bool { return published(mb, dead.ID) })
	br.waitStatus(srv.URL+"/find?id="+dead.ID, "#find-outbox td.status", "SENT")

	// Open the parked inbox event, replay it, and see the consumer apply it.
	var mu sync.Mutex
	applied := map[string]int{}
	ist, err := store.SQLInbox(h.SQLDB(t, s), s.(interface {
		InboxDialect() store.InboxDialect
		store.InboxAdmin
	}))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := inbox.New(ist, inbox.Config{Name: "billing", Subscriber: mb.Subscribe("billing", "none"),
		ReplayInterval: 100 * time.Millisecond, Logger: quiet()},
		func(_ context.Context, _ *sql.Tx, e txbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			applied[e.ID]++
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cons.Run(ctx) }()
	br.do("inbox", chromedp.Navigate(srv.URL+"/inbox"), chromedp.WaitVisible(chromedp.CSS("#inbox-rows a.event")))
	br.do("open parked event", chromedp.Click(chromedp.CSS("#inbox-rows a.event")), chromedp.WaitVisible(chromedp.CSS("#event-id")))
	if got := br.text("#event-id"); got != parked.ID {
		t.Fatalf("inbox details show %q, want %q", got, parked.ID)
	}
	shot("console-inbox-event.png")
	br.do("inbox replay", chromedp.Click(chromedp.CSS("#replay")), chromedp.WaitVisible(chromedp.CSS("#done")))
	br.waitStatus(srv.URL+"/find?id="+parked.ID, "#find-inbox td.status", "PROCESSED")
	mu.Lock()
	n := applied[parked.ID]
	mu.Unlock()
	if n != 1 {
		t.Fatalf("consumer applied the replayed event %d times, want 1", n)
	}
}

// browser is one tab, failing the test on any error.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(v)
}

// waitStatus reloads url until the element shows want, as an operator
// pressing F5 would.
func (b *browser) waitStatus(url, sel, want string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got string
	for {
		b.do("find", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("h1")))
		n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int]("document.querySelectorAll("+strconv.Quote(sel)+").length"))
		if err != nil {
			b.t.Fatal(err)
		}
		if n > 0 {
			if got = b.text(sel); got == want {
				return
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: status %q, want %q", url, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func published(mb *membroker.Broker, id string) bool {
	for _, m := range mb.Messages() {
		if m.Event.ID == id {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
