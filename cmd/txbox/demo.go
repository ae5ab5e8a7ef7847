package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/sqlite"
)

type demoOpts struct {
	orders     int
	duration   time.Duration
	kills      int
	dupes      int
	flaky      int
	seed       uint64
	keep       bool
	quiet      bool
	relayBatch int
}

func newDemo() *cobra.Command {
	var o demoOpts
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run an order service, the relay and an inventory consumer with faults injected, then check the result",
		Long: `demo starts an embedded NATS JetStream server and two SQLite files in a
temporary directory (nothing to install), then runs:
  - an order service writing orders and their events in transactions,
    every tenth rolled back on purpose;
  - txbox relay as a child process, killed with SIGKILL mid-batch and restarted;
  - an inventory service consuming through the inbox, whose handler fails
    the first attempts of some events;
  - a rogue republisher that sends already delivered events again.
It shows a live view, then a verdict computed from the databases:
lost events and double effects must both be 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.orders, "orders", 1500, "orders to place")
	f.DurationVar(&o.duration, "duration", 20*time.Second, "how long the order service writes")
	f.IntVar(&o.kills, "kills", 3, "relay SIGKILLs during the run")
	f.IntVar(&o.dupes, "duplicates", 50, "already delivered events to publish again")
	f.IntVar(&o.flaky, "flaky-every", 40, "every n-th event fails twice in the consumer before it succeeds (0: none)")
	f.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock)")
	f.BoolVar(&o.keep, "keep", false, "keep the temporary directory")
	f.BoolVar(&o.quiet, "quiet", false, "no live view, only the verdict")
	f.IntVar(&o.relayBatch, "relay-batch", 100, "relay batch size")
	return cmd
}

// demoWorld is what the demo runs on.
type demoWorld struct {
	dir        string
	ordersDB   *sqlite.Store
	invDB      *sqlite.Store
	ns         *server.Server
	natsURL    string
	written    atomic.Int64
	rolledBack atomic.Int64
	kills      atomic.Int64
	republish  atomic.Int64
}

const (
	demoStream  = "DEMO"
	demoSubject = "demo.>"
	demoTopic   = "demo.{aggregate_type}.{event_type}"
)

func runDemo(ctx context.Context, out io.Writer, o demoOpts) error {
	if o.orders < 1 || o.duration <= 0 {
		return &txbox.ConfigError{Field: "--orders/--duration", Reason: "must be positive"}
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))
	w, err := newDemoWorld(ctx, o)
	if err != nil {
		return err
	}
	defer w.close(o.keep, out)
	fmt.Fprintf(out, "txbox demo: %d orders over %v, %d relay kills, %d republished duplicates, seed %d\n", o.orders, o.duration, o.kills, o.dupes, o.seed)
	fmt.Fprintf(out, "  databases: %s/{orders,inventory}.db   broker: embedded NATS JetStream at %s\n", w.dir, w.natsURL)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup

	// The relay, as a process of its own so that it can really be killed.
	relay := &demoRelay{w: w, batch: o.relayBatch}
	if err := relay.start(); err != nil {
		return err
	}
	defer relay.stop()

	// The inventory service.
	consumer, err := w.consumer(o)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = consumer.Run(runCtx) }()

	// The order service.
	writeDone := make(chan error, 1)
	go func() { writeDone <- w.placeOrders(runCtx, o, rng) }()

	// Faults on a seeded schedule over the writing window.
	faults := w.faultSchedule(o, rng)
	view := time.NewTicker(500 * time.Millisecond)
	defer view.Stop()
	start := time.Now()
	tty := isTerminal(out)
	var lastLine time.Time
	writing := true
	deadline := start.Add(o.duration + 60*time.Second)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-writeDone:
			if err != nil {
				return err
			}
			writing = false
		case <-view.C:
		}
		for len(faults) > 0 && time.Since(start) >= faults[0].at {
			faults[0].do(runCtx, relay)
			faults = faults[1:]
		}
		st := w.status(ctx, consumer)
		if !o.quiet && (tty || time.Since(lastLine) >= 2*time.Second) {
			// On a terminal the line is redrawn in place; in a log, one line
			// every two seconds.
			lead, tail := "\r", "   "
			if !tty {
				lead, tail = "", "\n"
			}
			fmt.Fprintf(out, "%s  %5.1fs  written %d  sent %d  consumed %d  duplicates absorbed %d  retries %d  backlog %d  relay kills %d%s",
				lead, time.Since(start).Seconds(), st.events, st.sent, st.consumed, st.dups, st.retries, st.backlog, w.kills.Load(), tail)
			lastLine = time.Now()
		}
		if !writing && len(faults) == 0 && st.backlog == 0 && st.consumed >= st.events && st.events > 0 {
			if !o.quiet && !tty {
				fmt.Fprintf(out, "  %5.1fs  written %d  sent %d  consumed %d  duplicates absorbed %d  retries %d  backlog %d  relay kills %d  (drained)\n",
					time.Since(start).Seconds(), st.events, st.sent, st.consumed, st.dups, st.retries, st.backlog, w.kills.Load())
			}
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(out)
			break
		}
	}
	if !o.quiet && tty {
		fmt.Fprintln(out)
	}
	time.Sleep(300 * time.Millisecond) // let straggling duplicates arrive, so they are counted too
	stop()
	wg.Wait()
	return w.verdict(context.WithoutCancel(ctx), out, consumer)
}

func newDemoWorld(ctx context.Context, o demoOpts) (*demoWorld, error) {
	dir, err := os.MkdirTemp("", "txbox-demo-")
	if err != nil {
		return nil, err
	}
	w := &demoWorld{dir: dir}
	fail := func(err error) (*demoWorld, error) { w.close(false, io.Discard); return nil, err }
	w.ns, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return fail(fmt.Errorf("embedded nats: %w", err))
	}
	w.ns.Start()
	if !w.ns.ReadyForConnections(10 * time.Second) {
		return fail(errors.New("embedded nats did not start"))
	}
	w.natsURL = w.ns.ClientURL()
	// A short duplicate window lets the relay's republished copies through,
	// so the inbox has real duplicates to absorb.
	p, err := natsbroker.Open(ctx, w.natsURL, natsbroker.Options{Stream: demoStream, Subjects: []string{demoSubject}, CreateStream: true, DuplicateWindow: time.Second, Connection: natsbroker.Connection{Logger: discardLogger()}})
	if err != nil {
		return fail(err)
	}
	_ = p.Close()
	quiet := discardLogger()
	if w.ordersDB, err = sqlite.Open(ctx, filepath.Join(dir, "orders.db"), sqlite.Options{Logger: quiet}); err != nil {
		return fail(err)
	}
	if w.invDB, err = sqlite.Open(ctx, filepath.Join(dir, "inventory.db"), sqlite.Options{Logger: quiet}); err != nil {
		return fail(err)
	}
	for _, s := range []*sqlite.Store{w.ordersDB, w.invDB} {
		if err := s.Migrate(ctx); err != nil {
			return fail(err)
		}
	}
	if _, err := w.ordersDB.DB().ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, sku TEXT NOT NULL, qty INTEGER NOT NULL)`); err != nil {
		return fail(err)
	}
	if _, err := w.invDB.DB().ExecContext(ctx, `CREATE TABLE reservations (order_id TEXT PRIMARY KEY, sku TEXT NOT NULL, qty INTEGER NOT NULL, applied INTEGER NOT NULL)`); err != nil {
		return fail(err)
	}
	return w, nil
}

func (w *demoWorld) close(keep bool, out io.Writer) {
	if w.ordersDB != nil {
		w.ordersDB.Close()
	}
	if w.invDB != nil {
		w.invDB.Close()
	}
	if w.ns != nil {
		w.ns.Shutdown()
		w.ns.WaitForShutdown()
	}
	if keep {
		fmt.Fprintf(out, "kept %s\n", w.dir)
		return
	}
	_ = os.RemoveAll(w.dir)
}

// placeOrders writes orders at an even pace over the duration; every tenth
// transaction fails after writing, so its order and event roll back.
func (w *demoWorld) placeOrders(ctx context.Context, o demoOpts, rng *rand.Rand) error {
	writer := outbox.NewWriter(w.ordersDB.Dialect())
	pace := o.duration / time.Duration(o.orders)
	next := time.Now()
	for i := range o.orders {
		if ctx.Err() != nil {
			return nil
		}
		id := fmt.Sprintf("order-%05d", i)
		sku := fmt.Sprintf("sku-%d", rng.IntN(20))
		qty := 1 + rng.IntN(5)
		rollback := i%10 == 7
		err := writer.RunSQL(ctx, w.ordersDB.DB(), nil, func(ctx context.Context, tx *sql.Tx, rec *outbox.Recorder) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, sku, qty) VALUES (?, ?, ?)`, id, sku, qty); err != nil {
				return err
			}
			ev, err := txbox.NewEvent("Order", id, "OrderCreated", map[string]any{"order_id": id, "sku": sku, "qty": qty})
			if err != nil {
				return err
			}
			rec.Record(ev)
			if rollback {
				return errDemoRollback
			}
			return nil
		})
		switch {
		case errors.Is(err, errDemoRollback):
			w.rolledBack.Add(1)
		case err != nil:
			return fmt.Errorf("order service: %w", err)
		default:
			w.written.Add(1)
		}
		next = next.Add(pace)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	return nil
}

var errDemoRollback = errors.New("payment declined (rolled back on purpose)")

func (w *demoWorld) consumer(o demoOpts) (*inbox.Consumer, error) {
	sub, err := natsbroker.OpenSubscriber(context.Background(), w.natsURL, natsbroker.SubscriberOptions{
		Stream: demoStream, Durable: "inventory", AckWait: 5 * time.Second, Connection: natsbroker.Connection{Logger: discardLogger()}})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	failures := map[string]int{}
	var seq atomic.Int64
	return inbox.New(w.invDB, inbox.Config{
		Name: "inventory", Subscriber: sub,
		BackoffBase: 50 * time.Millisecond, BackoffMax: 400 * time.Millisecond, Logger: discardLogger(),
	}, func(ctx context.Context, tx *sql.Tx, ev txbox.Event) error {
		var o2 struct {
			OrderID string `json:"order_id"`
			SKU     string `json:"sku"`
			Qty     int    `json:"qty"`
		}
		if err := json.Unmarshal(ev.Payload, &o2); err != nil {
			return err
		}
		// The effect counts its applications: the verdict reads them.
		res, err := tx.ExecContext(ctx, `UPDATE reservations SET applied = applied + 1 WHERE order_id = ?`, o2.OrderID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO reservations (order_id, sku, qty, applied) VALUES (?, ?, ?, 1)`, o2.OrderID, o2.SKU, o2.Qty); err != nil {
				return err
			}
		}
		if o.flaky > 0 && seq.Add(1)%int64(o.flaky) == 0 {
			mu.Lock()
			failures[ev.ID] = 2
			mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		if failures[ev.ID] > 0 {
			failures[ev.ID]--
			return errors.New("stock service timed out (injected)")
		}
		return nil
	})
}

type demoFault struct {
	at time.Duration
	do func(context.Context, *demoRelay)
}

func (w *demoWorld) faultSchedule(o demoOpts, rng *rand.Rand) []demoFault {
	var fs []demoFault
	for i := range o.kills {
		at := o.duration * time.Duration(2*i+1) / time.Duration(2*o.kills+1)
		at += time.Duration(rng.IntN(300)) * time.Millisecond
		fs = append(fs, demoFault{at: at, do: func(context.Context, *demoRelay) {}})
		fs[len(fs)-1].do = func(_ context.Context, r *demoRelay) {
			r.kill()
			w.kills.Add(1)
			_ = r.start()
		}
	}
	if o.dupes > 0 {
		at := o.duration * 3 / 4
		n := o.dupes
		fs = append(fs, demoFault{at: at, do: func(ctx context.Context, _ *demoRelay) { w.republishSent(ctx, n, rng) }})
	}
	// Keep them in time order.
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].at < fs[j-1].at; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
	return fs
}

// republishSent plays a misbehaving producer: it publishes n events that
// were already delivered, straight to the broker, bypassing the relay.
func (w *demoWorld) republishSent(ctx context.Context, n int, rng *rand.Rand) {
	recs, err := w.ordersDB.List(ctx, store.Filter{Status: txbox.StatusSent, Limit: 5000})
	if err != nil || len(recs) == 0 {
		return
	}
	p, err := natsbroker.Open(ctx, w.natsURL, natsbroker.Options{Stream: demoStream, Connection: natsbroker.Connection{Logger: discardLogger()}})
	if err != nil {
		return
	}
	defer p.Close()
	time.Sleep(1100 * time.Millisecond) // past the stream's duplicate window
	var msgs []broker.Message
	for range n {
		r := recs[rng.IntN(len(recs))]
		if e, err := r.Event(); err == nil {
			msgs = append(msgs, broker.Message{Event: e, Topic: broker.Topic(demoTopic).Render(e), Source: "rogue-republisher"})
		}
	}
	for _, err := range p.Publish(ctx, msgs) {
		if err == nil {
			w.republish.Add(1)
		}
	}
}

type demoRelay struct {
	w     *demoWorld
	batch int
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
}

func (r *demoRelay) start() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "relay", "--db", "sqlite://"+filepath.Join(r.w.dir, "orders.db"), "--broker", r.w.natsURL,
		"--nats-stream", demoStream, "--topic", demoTopic, "--batch-size", strconv.Itoa(r.batch),
		"--lease", "2s", "--publish-timeout", "500ms", "--poll-interval", "20ms", "--log-level", "error")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start relay: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	return nil
}

// running returns the relay process last started and the channel closed
// when it exits; cmd is nil before the first start.
func (r *demoRelay) running() (cmd *exec.Cmd, done chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd, r.done
}

// kill waits until the relay is inside a batch (rows leased to it), then
// sends SIGKILL: the crash an outbox must survive.
func (r *demoRelay) kill() {
	cmd, done := r.running()
	if cmd == nil {
		return
	}
	for range 100 {
		st, err := r.w.ordersDB.Stats(context.Background())
		if err == nil && st.Counts[txbox.StatusProcessing] > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

func (r *demoRelay) stop() {
	cmd, done := r.running()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

type demoStatus struct {
	events, sent, backlog, consumed, dups, retries int64
}

func (w *demoWorld) status(ctx context.Context, c *inbox.Consumer) demoStatus {
	var st demoStatus
	if s, err := w.ordersDB.Stats(ctx); err == nil {
		for _, n := range s.Counts {
			st.events += n
		}
		st.sent = s.Counts[txbox.StatusSent]
		st.backlog = s.Counts[txbox.StatusPending] + s.Counts[txbox.StatusRetry] + s.Counts[txbox.StatusProcessing]
	}
	ct := c.Stats()
	st.consumed, st.dups, st.retries = ct.Processed, ct.Duplicates, ct.Failed
	return st
}

// verdict reads the databases, not the counters: every committed order must
// have exactly one reservation, and no rolled-back one any.
func (w *demoWorld) verdict(ctx context.Context, out io.Writer, c *inbox.Consumer) error {
	q := func(db *sql.DB, query string) int64 {
		var n int64
		_ = db.QueryRowContext(ctx, query).Scan(&n)
		return n
	}
	orders := q(w.ordersDB.DB(), `SELECT count(*) FROM orders`)
	st, err := w.ordersDB.Stats(ctx)
	if err != nil {
		return err
	}
	var events int64
	for _, n := range st.Counts {
		events += n
	}
	effects := q(w.invDB.DB(), `SELECT count(*) FROM reservations`)
	double := q(w.invDB.DB(), `SELECT count(*) FROM reservations WHERE applied > 1`)
	// Lost: a committed order without its effect. Phantom: an effect of an
	// order that was rolled back.
	if _, err := w.invDB.DB().ExecContext(ctx, `ATTACH DATABASE ? AS o`, filepath.Join(w.dir, "orders.db")); err != nil {
		return err
	}
	lost := q(w.invDB.DB(), `SELECT count(*) FROM o.orders x WHERE NOT EXISTS (SELECT 1 FROM reservations r WHERE r.order_id = x.id)`)
	phantom := q(w.invDB.DB(), `SELECT count(*) FROM reservations r WHERE NOT EXISTS (SELECT 1 FROM o.orders x WHERE x.id = r.order_id)`)
	ct := c.Stats()
	fmt.Fprintf(out, "\nverdict (from the databases):\n")
	fmt.Fprintf(out, "  orders committed      %d   (rolled back on purpose: %d)\n", orders, w.rolledBack.Load())
	fmt.Fprintf(out, "  events in the outbox  %d   (SENT %d, DEAD %d)\n", events, st.Counts[txbox.StatusSent], st.Dead)
	fmt.Fprintf(out, "  effects applied       %d\n", effects)
	fmt.Fprintf(out, "  faults                %d relay SIGKILLs, %d events republished by a rogue producer, %d handler failures retried\n",
		w.kills.Load(), w.republish.Load(), ct.Failed)
	fmt.Fprintf(out, "  duplicates absorbed   %d\n", ct.Duplicates)
	fmt.Fprintf(out, "  lost                  %d\n", lost)
	fmt.Fprintf(out, "  double effects        %d\n", double)
	fmt.Fprintf(out, "  effects of rollbacks  %d\n", phantom)
	if lost != 0 || double != 0 || phantom != 0 || orders != events || orders != effects {
		fmt.Fprintln(out, "VERDICT: FAIL")
		return fmt.Errorf("demo verdict: lost %d, double effects %d, phantom effects %d", lost, double, phantom)
	}
	fmt.Fprintln(out, "VERDICT: OK  every committed order was applied exactly once; nothing was lost")
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
