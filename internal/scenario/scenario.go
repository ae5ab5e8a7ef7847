// Package scenario holds the end-to-end relay scenarios of the acceptance
// criteria, written once and run for every store and every broker: a row from
// a foreign producer, commit and rollback, SIGKILL during a backlog, two relay
// processes, the broker down, a poison row and dead-letter replay, stats.
package scenario

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/storetest"
)

// Store is a database under test.
type Store interface {
	storetest.Harness
	// URL is the --db URL under which the txbox binary reaches s.
	URL(t *testing.T, s store.Store) string
	// SQLDB is s's database as *sql.DB, for inbox consumers.
	SQLDB(t *testing.T, s store.Store) *sql.DB
}

// LeaseClaims runs the scenarios of Store with relays that always write a
// lease into the rows they claim (`txbox relay --claims lease`,
// relay.ClaimLease), on a store that would otherwise hold them with the
// claim's transaction (PostgreSQL).
type LeaseClaims struct{ Store }

// claims is the claim mode of st's relays: "" (the default) unless st is
// LeaseClaims.
func claims(st Store) relay.ClaimMode {
	if _, ok := st.(LeaseClaims); ok {
		return relay.ClaimLease
	}
	return ""
}

// Broker is a broker under test.
type Broker interface {
	// Setup prepares a fresh destination for one test.
	Setup(t *testing.T) *Destination
}

// Destination is one test's view of a broker.
type Destination struct {
	URL   string   // --broker
	Args  []string // extra flags for `txbox relay`
	Topic string   // --topic template
	// Publisher opens a publisher for in-process relays.
	Publisher func(t *testing.T) broker.Publisher
	// Tapped returns every message published so far, duplicates included,
	// in arrival order.
	Tapped func() []Seen
	// Stored returns what the broker durably holds, in its order.
	Stored func(t *testing.T) []Seen
	// Stop and Start stop and restart the broker; nil when the harness
	// cannot (then the broker-down scenario is skipped with a reason).
	Stop, Start func()
	// PoisonType is an event type that makes an invalid destination under
	// Topic; "" when the broker accepts any.
	PoisonType string
	// Subscriber opens a durable consumer of the destination.
	Subscriber func(t *testing.T, durable string) broker.Subscriber
	// DedupeWindow is how long the broker drops a republished event id
	// (0: it does not).
	DedupeWindow time.Duration
}

// Seen is one message as the broker carried it.
type Seen struct {
	EventID     string
	AggregateID string
	Type        string
}

// Run runs every scenario for one store and one broker.
func Run(t *testing.T, st Store, br Broker) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Store, Broker)
	}{
		{"ForeignProducerRow", ForeignProducerRow},
		{"CommitInOrderRollbackNothing", CommitInOrderRollbackNothing},
		{"RelaySIGKILLDuringBacklog", RelayKilledDuringBacklog},
		{"TwoRelayProcesses", TwoRelayProcesses},
		{"BrokerDown", BrokerDown},
		{"DatabaseDown", DatabaseDown},
		{"PoisonRowDeadAndReplay", PoisonRowDeadAndReplay},
		{"StatsCommand", StatsCommand},
		{"InboxDuplicateDeliveries", InboxDuplicateDeliveries},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, st, br) })
	}
}

func migrated(t *testing.T, st Store) store.Store {
	t.Helper()
	s := storeenv.Migrated(t, st.Open(t))
	if isCDC(st) {
		migrateCDC(t, s)
	}
	return s
}

// write commits events through the public write API, chunk per transaction.
func write(t *testing.T, st Store, s store.Store, chunk int, events []txbox.Event) {
	t.Helper()
	for len(events) > 0 {
		n := min(chunk, len(events))
		storeenv.Write(t, st, s, events[:n]...)
		events = events[n:]
	}
}

// backlog makes n events over aggs aggregates, interleaved, in write order.
func backlog(n, aggs int) []txbox.Event {
	evs := make([]txbox.Event, n)
	for i := range evs {
		agg := fmt.Sprintf("agg-%03d", i%aggs)
		evs[i] = txbox.MustEvent("Order", agg, "OrderUpdated", map[string]any{"seq": i, "note": strings.Repeat("x", 200)})
	}
	return evs
}

func relayArgs(t *testing.T, st Store, s store.Store, d *Destination, extra ...string) []string {
	tb := s.Tables()
	args := []string{"relay", "--db", st.URL(t, s), "--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox,
		"--broker", d.URL, "--topic", d.Topic, "--log-level", "warn"}
	if tb.Schema != "" {
		args = append(args, "--schema", tb.Schema)
	}
	if c := claims(st); c != "" {
		args = append(args, "--claims", string(c))
	}
	if isCDC(st) {
		args = append(args, "--mode", "cdc", "--slot", slotName(s))
	}
	args = append(args, d.Args...)
	return append(args, extra...)
}

// inProcess starts a relay in this process, with st's claim mode; it stops
// when the test ends.
func inProcess(t *testing.T, st Store, s store.Store, d *Destination, cfg relay.Config) *relay.Relay {
	t.Helper()
	return inProcessAt(t, st, s, st.URL(t, s), d, cfg)
}

// inProcessAt is inProcess for a store reached at url (a CDC relay's
// replication connection uses it).
func inProcessAt(t *testing.T, st Store, s store.Store, url string, d *Destination, cfg relay.Config) *relay.Relay {
	t.Helper()
	if isCDC(st) {
		return inProcessCDC(t, s, url, d, cfg)
	}
	cfg.Store, cfg.Publisher, cfg.Topic, cfg.Claims = s, d.Publisher(t), broker.Topic(d.Topic), claims(st)
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, r.Run)
	return r
}

// waitStored waits until every id in want is stored. It fails once nothing
// more arrived for stall (the rest is LOST, or the relay stalled), or after
// four times stall in all: a drain a loaded machine slows down is no loss
// while it moves (a 2-core machine running the suite beside two CPU hogs
// drained 7,000 of 10,000 events through RabbitMQ in the first 90 s).
func waitStored(t *testing.T, d *Destination, want []txbox.Event, stall time.Duration) []Seen {
	t.Helper()
	start := time.Now()
	lastMissing, lastMove := len(want)+1, start
	for {
		got := d.Stored(t)
		ids := map[string]bool{}
		for _, s := range got {
			ids[s.EventID] = true
		}
		missing := 0
		for _, e := range want {
			if !ids[e.ID] {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if missing < lastMissing {
			lastMissing, lastMove = missing, time.Now()
		}
		if since := time.Since(lastMove); since > stall || time.Since(start) > 4*stall {
			t.Fatalf("after %v (nothing new for the last %v), %d of %d events are not in the broker (LOST)",
				time.Since(start).Round(time.Second), since.Round(time.Second), missing, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkOrder verifies per-aggregate order of first appearance against the
// write order, and returns the number of extra copies.
func checkOrder(t *testing.T, what string, seen []Seen, written []txbox.Event) int {
	t.Helper()
	_, extra := testenv.FirstOrder(t, what, written, seen, func(s Seen) (string, string) { return s.EventID, s.AggregateID })
	return extra
}

// ForeignProducerRow: a row inserted with plain SQL, giving only the five
// contract columns, is delivered by the txbox binary.
func ForeignProducerRow(t *testing.T, st Store, br Broker) {
	s := migrated(t, st)
	d := br.Setup(t)
	id := txbox.NewID()
	st.ForeignInsert(t, s, id, "Invoice", "inv-42", "InvoiceIssued", `{"amount": 99.5, "currency": "EUR"}`)
	Start(t, testenv.Binary(t), relayArgs(t, st, s, d, "--poll-interval", "50ms")...)
	got := waitStored(t, d, []txbox.Event{{ID: id}}, 20*time.Second)
	for _, g := range got {
		if g.EventID == id && (g.Type != "InvoiceIssued" || g.AggregateID != "inv-42") {
			t.Fatalf("foreign row arrived as %+v", g)
		}
	}
	waitStatus(t, s, id, txbox.StatusSent, 10*time.Second)
}

func waitStatus(t *testing.T, s store.Store, eventID string, want txbox.Status, d time.Duration) store.Record {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		recs, err := s.List(context.Background(), store.Filter{EventIDs: []string{eventID}})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 && recs[0].Status == want {
			return recs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s: status %v, want %s", eventID, recs, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CommitInOrderRollbackNothing: a rolled-back transaction emits nothing; a
// committed one emits all its events, in order.
func CommitInOrderRollbackNothing(t *testing.T, st Store, br Broker) {
	s := migrated(t, st)
	d := br.Setup(t)
	w := outbox.NewWriter(s.Dialect())
	ctx := context.Background()

	rolled := []txbox.Event{txbox.MustEvent("Order", "o-1", "OrderCreated", nil), txbox.MustEvent("Order", "o-1", "OrderPaid", nil)}
	tx, _, rollback := st.Begin(t, s)
	if err := w.Add(ctx, tx, rolled...); err != nil {
		t.Fatal(err)
	}
	if err := rollback(); err != nil {
		t.Fatal(err)
	}
	var committed []txbox.Event
	for i, typ := range []string{"OrderCreated", "OrderPaid", "OrderPacked", "OrderShipped", "OrderDelivered"} {
		committed = append(committed, txbox.MustEvent("Order", "o-2", typ, map[string]int{"step": i}))
	}
	write(t, st, s, 100, committed)
	inProcess(t, st, s, d, relay.Config{})
	got := waitStored(t, d, committed, 20*time.Second)
	time.Sleep(300 * time.Millisecond) // give a wrongly emitted event time to show up
	got = d.Stored(t)
	var order []string
	for _, g := range got {
		for _, r := range rolled {
			if g.EventID == r.ID {
				t.Fatalf("rolled-back event %s (%s) was delivered", r.ID, r.Type)
			}
		}
		if g.AggregateID == "o-2" {
			order = append(order, g.Type)
		}
	}
	if strings.Join(order, ",") != "OrderCreated,OrderPaid,OrderPacked,OrderShipped,OrderDelivered" {
		t.Fatalf("committed events out of order: %v", order)
	}
}

// RelayKilledDuringBacklog: the relay process is SIGKILLed several times
// while it drains 10,000 events and restarted each time. Nothing is lost,
// per-aggregate order of first delivery holds, and the extra copies are
// bounded by what was in flight (one batch per kill).
func RelayKilledDuringBacklog(t *testing.T, st Store, br Broker) {
	s := migrated(t, st)
	d := br.Setup(t)
	const n, aggs, batch, workers, kills = 10000, 100, 200, 2, 5
	evs := backlog(n, aggs)
	write(t, st, s, 1000, evs)
	bin := testenv.Binary(t)
	args := relayArgs(t, st, s, d, "--batch-size", fmt.Sprint(batch), "--workers", fmt.Sprint(workers), "--lease", "2s", "--publish-timeout", "500ms", "--poll-interval", "20ms")
	// Lease claims write PROCESSING into the rows they hold (and a killed
	// relay's stay so until their lease ends); transaction-held claims
	// never do. Counting the runs that showed leases shows which mode ran.
	killed, leftLeased := 0, 0
	for killed < kills {
		before := len(d.Stored(t))
		p := Start(t, bin, args...)
		// Kill it in the middle of its work, not while it starts up (on a
		// loaded machine start-up alone can outlast a fixed sleep): wait
		// until this process has published something, then a little more.
		for deadline := time.Now().Add(30 * time.Second); len(d.Stored(t)) == before && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		// Leases are looked for until the kill and just after it: a relay
		// that a loaded machine slowed past --publish-timeout may be
		// paused at the kill (a broker that does not confirm in time is an
		// outage) with nothing claimed.
		leased := false
		for end := time.Now().Add(time.Duration(rand.IntN(250)) * time.Millisecond); ; {
			if stats, err := s.Stats(context.Background()); err == nil && stats.Counts[txbox.StatusProcessing] > 0 {
				leased = true
			}
			if time.Now().After(end) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		p.Kill()
		killed++
		if stats, err := s.Stats(context.Background()); err == nil && stats.Counts[txbox.StatusProcessing] > 0 || leased {
			leftLeased++
		}
		if len(d.Stored(t)) >= n {
			break // drained before all kills landed; still a valid run
		}
	}
	t.Logf("killed the relay %d times; %d events stored before the final run", killed, len(d.Stored(t)))
	final := Start(t, bin, args...)
	stored := waitStored(t, d, evs, 90*time.Second)
	if !final.Term(15 * time.Second) {
		t.Fatalf("relay did not stop cleanly on SIGTERM")
	}
	checkOrder(t, "stored", stored, evs)
	if d.Tapped != nil {
		extra := checkOrder(t, "published", d.Tapped(), evs)
		bound := killed * batch * workers
		t.Logf("extra copies published: %d (bound %d = %d kills x %d batches of %d in flight)", extra, bound, killed, workers, batch)
		if extra > bound {
			t.Fatalf("%d extra copies exceed the in-flight bound %d", extra, bound)
		}
	}
	if killed < 2 {
		t.Fatalf("only %d kills landed during the backlog; the scenario proved too little", killed)
	}
	switch _, txHeld := s.(claimapi.TxClaimer); {
	case claims(st) == relay.ClaimLease && leftLeased == 0:
		t.Fatalf("--claims lease: none of %d runs showed a leased (PROCESSING) row: the relay did not claim by lease", killed)
	case txHeld && claims(st) != relay.ClaimLease && leftLeased > 0:
		t.Fatalf("transaction-held claims: %d of %d runs showed PROCESSING rows", leftLeased, killed)
	}
}

// TwoRelayProcesses: two relays on one table lose nothing and never both
// publish a row while each holds its lease.
func TwoRelayProcesses(t *testing.T, st Store, br Broker) {
	s := migrated(t, st)
	d := br.Setup(t)
	const n = 6000
	evs := backlog(n, 150)
	write(t, st, s, 1000, evs)
	bin := testenv.Binary(t)
	args := relayArgs(t, st, s, d, "--batch-size", "100", "--poll-interval", "20ms")
	a := Start(t, bin, append(args, "--relay-id", "relay-a")...)
	b := Start(t, bin, append(args, "--relay-id", "relay-b")...)
	stored := waitStored(t, d, evs, 90*time.Second)
	a.Term(10 * time.Second)
	b.Term(10 * time.Second)
	checkOrder(t, "stored", stored, evs)
	if d.Tapped != nil {
		if extra := checkOrder(t, "published", d.Tapped(), evs); extra != 0 {
			t.Fatalf("%d rows were published twice by two relays holding leases", extra)
		}
	}
}

// BrokerDown: the broker goes away in the middle of a run for many times
// the whole retry schedule (MaxAttempts 3 with back-off of 100-200 ms would
// spend every attempt within half a second). An outage of the way out is
// not the events' failure: nothing goes DEAD, no row's retry_count moves,
// the relay says it is not ready and why, and once the broker is back every
// event is delivered, each aggregate in order (first copies), without
// duplicates where the broker drops republished ids.
func BrokerDown(t *testing.T, st Store, br Broker) {
	d := br.Setup(t)
	if d.Stop == nil || d.Start == nil {
		t.Skip("broker harness cannot stop its broker: broker-down scenario not run for it")
	}
	s := migrated(t, st)
	warm := backlog(20, 5)
	write(t, st, s, 100, warm)
	const probeMax = time.Second
	r := inProcess(t, st, s, d, relay.Config{BackoffBase: 100 * time.Millisecond, BackoffMax: 200 * time.Millisecond, MaxAttempts: 3,
		OutageProbeMax: probeMax, PublishTimeout: 500 * time.Millisecond, Lease: 5 * time.Second})
	waitStored(t, d, warm, 20*time.Second)
	d.Stop()
	evs := backlog(50, 10)
	write(t, st, s, 100, evs)
	ctx := context.Background()
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	downFor := 8 * time.Second
	end := time.Now().Add(downFor)
	notReady := ""
	for time.Now().Before(end) {
		checkNoAttemptSpent(t, s, ids, "broker down")
		if err := r.Ready(ctx); err != nil && strings.Contains(err.Error(), "broker") {
			notReady = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	if notReady == "" {
		t.Fatal("the relay never said it was not ready while its broker was down")
	}
	if st := r.Stats(); st.Dead != 0 || st.Retried != 0 || st.Deferred == 0 {
		t.Fatalf("broker down: dead %d, retried %d, deferred %d: want deferrals only", st.Dead, st.Retried, st.Deferred)
	}
	if isCDC(st) {
		// The change stream records nothing until the broker confirms: the
		// rows stay PENDING.
		if c, err := s.Stats(ctx); err != nil || c.Counts[txbox.StatusPending] != int64(len(evs)) {
			t.Fatalf("broker down: %v %v, want the %d new rows PENDING", c.Counts, err, len(evs))
		}
	}
	back := time.Now()
	d.Start()
	seen := waitStored(t, d, evs, 30*time.Second)
	t.Logf("delivered %v after the broker came back (probe interval at most %v)", time.Since(back).Round(time.Millisecond), probeMax)
	if extra := checkOrder(t, "after the outage", seen, append(append([]txbox.Event{}, warm...), evs...)); extra > 0 && d.DedupeWindow > 0 {
		t.Fatalf("%d duplicate copies in a broker that drops republished ids", extra)
	}
	if !isCDC(st) {
		waitSentUnspent(t, s, ids)
	}
}

// Reopener is a Store whose tables can be opened again at another URL
// (storeenv.Postgres, storeenv.MySQL): the relay's own way to its
// database, which a test can cut while writers go on.
type Reopener interface {
	Reopen(t *testing.T, s store.Store, url string) store.Store
}

// reopener is st's Reopener, looking through LeaseClaims and CDC.
func reopener(st Store) (Reopener, bool) {
	switch w := st.(type) {
	case LeaseClaims:
		return reopener(w.Store)
	case CDC:
		return reopener(w.Store)
	}
	r, ok := st.(Reopener)
	return r, ok
}

// DatabaseDown: the relay's database goes away (its connections cut, new
// ones refused) in the middle of a backlog, for many times the whole retry
// schedule, while the producers, who reach it their own way, go on
// writing. Publishes whose marks fail come back unchanged; nothing goes
// DEAD, no retry_count moves, the relay says the database is why it is not
// ready, and once the database is back every event is delivered, each
// aggregate in order.
func DatabaseDown(t *testing.T, st Store, br Broker) {
	ro, ok := reopener(st)
	if !ok {
		t.Skip("embedded database: no server to lose; the relay's database-down scenario needs one")
	}
	d := br.Setup(t)
	s := migrated(t, st)
	url, proxy := testenv.ProxyURL(t, st.URL(t, s))
	rs := ro.Reopen(t, s, url)
	warm := backlog(20, 5)
	write(t, st, s, 100, warm)
	r := inProcessAt(t, st, rs, url, d, relay.Config{BackoffBase: 100 * time.Millisecond, BackoffMax: 200 * time.Millisecond, MaxAttempts: 3,
		OutageProbeMax: time.Second, PublishTimeout: 500 * time.Millisecond, Lease: 3 * time.Second, BatchSize: 50, MetricsInterval: 200 * time.Millisecond})
	waitStored(t, d, warm, 20*time.Second)
	evs := backlog(2000, 20)
	write(t, st, s, 500, evs[:1000])
	// Cut while the backlog drains, so batches in flight lose their marks.
	waitSome(t, d, evs[:1000], 50, 20*time.Second)
	proxy.Cut()
	write(t, st, s, 500, evs[1000:])
	ctx := context.Background()
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	end := time.Now().Add(6 * time.Second)
	notReady := ""
	for time.Now().Before(end) {
		if err := r.Ready(ctx); err != nil && strings.Contains(err.Error(), "database") {
			notReady = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkNoAttemptSpent(t, s, ids, "database down")
	if notReady == "" {
		t.Fatal("the relay never said it was not ready while its database was down")
	}
	if st := r.Stats(); st.Dead != 0 || st.Retried != 0 {
		t.Fatalf("database down: dead %d, retried %d: want none", st.Dead, st.Retried)
	}
	proxy.Restore()
	seen := waitStored(t, d, evs, 60*time.Second)
	checkOrder(t, "after the database outage", seen, append(append([]txbox.Event{}, warm...), evs...))
	if !isCDC(st) {
		waitSentUnspent(t, s, ids)
	}
	checkNoAttemptSpent(t, s, ids, "after the database outage")
}

// waitSome waits until at least n of want are stored.
func waitSome(t *testing.T, d *Destination, want []txbox.Event, n int, timeout time.Duration) {
	t.Helper()
	ids := map[string]bool{}
	for _, e := range want {
		ids[e.ID] = true
	}
	deadline := time.Now().Add(timeout)
	for {
		got := 0
		for _, s := range d.Stored(t) {
			if ids[s.EventID] {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d events stored after %v", got, n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkNoAttemptSpent fails if a row of ids is DEAD or has spent an
// attempt, wherever it is (outbox or archive).
func checkNoAttemptSpent(t *testing.T, s store.Store, ids []string, when string) {
	t.Helper()
	recs, err := s.List(context.Background(), store.Filter{EventIDs: ids, Limit: len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Status == txbox.StatusDead || rec.RetryCount != 0 {
			t.Fatalf("%s: %s is %s with retry_count %d (%s): an outage must spend no attempt", when, rec.EventID, rec.Status, rec.RetryCount, rec.LastError)
		}
	}
}

// waitSentUnspent waits until every row of ids is SENT, and fails if one
// spent an attempt.
func waitSentUnspent(t *testing.T, s store.Store, ids []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sent, err := s.List(context.Background(), store.Filter{EventIDs: ids, Status: txbox.StatusSent, Limit: len(ids)})
		if err != nil {
			t.Fatal(err)
		}
		if len(sent) == len(ids) {
			for _, rec := range sent {
				if rec.RetryCount != 0 {
					t.Fatalf("%s delivered with retry_count %d: the outage spent attempts", rec.EventID, rec.RetryCount)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rows SENT 10 s after they reached the broker", len(sent), len(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PoisonRowDeadAndReplay: a row that can never be delivered goes to DEAD
// with a clear last_error while 1,000 good rows flow; after the cause is
// fixed, `txbox dead replay` delivers it.
func PoisonRowDeadAndReplay(t *testing.T, st Store, br Broker) {
	d := br.Setup(t)
	if d.PoisonType == "" {
		t.Skip("broker accepts every destination: no poison event type for it")
	}
	s := migrated(t, st)
	good := backlog(1000, 50)
	poison := txbox.MustEvent("Order", "agg-007", d.PoisonType, map[string]string{"bad": "routing"})
	all := append(append(append([]txbox.Event{}, good[:500]...), poison), good[500:]...)
	write(t, st, s, 250, all)
	inProcess(t, st, s, d, relay.Config{BatchSize: 100})
	waitStored(t, d, good, 30*time.Second)
	rec := waitStatus(t, s, poison.ID, txbox.StatusDead, 10*time.Second)
	if !strings.Contains(rec.LastError, "permanent") || len(rec.LastError) < 20 {
		t.Fatalf("last_error not clear: %q", rec.LastError)
	}
	t.Logf("poison last_error: %s", rec.LastError)

	bin := testenv.Binary(t)
	db := []string{"--db", st.URL(t, s), "--outbox-table", s.Tables().Outbox}
	out, err := RunCmd(t, bin, append([]string{"dead", "list"}, db...)...)
	if err != nil || !strings.Contains(out, poison.ID) {
		t.Fatalf("dead list: %v\n%s", err, out)
	}
	// The cause: an event type that cannot be routed. The operator fixes the
	// row, then replays it by id.
	tx, commit, _ := st.Begin(t, s)
	if _, err := tx.Exec(context.Background(), "UPDATE "+s.Tables().Qualified(s.Tables().Outbox)+
		" SET event_type = 'OrderRouted' WHERE event_id = '"+poison.ID+"'"); err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	out, err = RunCmd(t, bin, append([]string{"dead", "replay", "--event-id", poison.ID}, db...)...)
	if err != nil || !strings.Contains(out, "replayed 1") {
		t.Fatalf("dead replay: %v\n%s", err, out)
	}
	waitStored(t, d, []txbox.Event{poison}, 20*time.Second)
	waitStatus(t, s, poison.ID, txbox.StatusSent, 10*time.Second)
}

// StatsCommand: `txbox stats` reports the right numbers in text and JSON.
func StatsCommand(t *testing.T, st Store, _ Broker) {
	s := migrated(t, st)
	ctx := context.Background()
	write(t, st, s, 100, backlog(12, 12))
	time.Sleep(1100 * time.Millisecond) // so the oldest pending age is over a second
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "stats", Limit: 6, LeaseFor: time.Hour})
	if err != nil || len(recs) != 6 {
		t.Fatalf("claim: %v %d", err, len(recs))
	}
	id := func(rs []store.Record) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	if _, err := s.MarkSent(ctx, "stats", id(recs[:3])); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkFailed(ctx, "stats", []store.Failure{{ID: recs[3].ID, Dead: true, Error: "x"}, {ID: recs[4].ID, Delay: time.Hour, Error: "y"}}); err != nil {
		t.Fatal(err)
	}
	// now: 3 SENT, 1 DEAD, 1 RETRY, 1 PROCESSING, 6 PENDING
	bin := testenv.Binary(t)
	db := []string{"--db", st.URL(t, s), "--outbox-table", s.Tables().Outbox}
	out, err := RunCmd(t, bin, append([]string{"stats", "--json"}, db...)...)
	if err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	var js struct {
		Counts  map[string]int64 `json:"counts"`
		Backlog int64            `json:"backlog"`
		Dead    int64            `json:"dead"`
		Age     float64          `json:"oldest_pending_age_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("stats --json is not JSON: %v\n%s", err, out)
	}
	want := map[string]int64{"SENT": 3, "DEAD": 1, "RETRY": 1, "PROCESSING": 1, "PENDING": 6}
	for k, v := range want {
		if js.Counts[k] != v {
			t.Fatalf("stats --json counts[%s] = %d, want %d\n%s", k, js.Counts[k], v, out)
		}
	}
	if js.Backlog != 8 || js.Dead != 1 || js.Age < 1 || js.Age > 120 {
		t.Fatalf("stats --json: backlog %d dead %d age %v\n%s", js.Backlog, js.Dead, js.Age, out)
	}
	out, err = RunCmd(t, bin, append([]string{"stats"}, db...)...)
	if err != nil {
		t.Fatalf("stats: %v\n%s", err, out)
	}
	for _, line := range []string{"PENDING      6", "PROCESSING   1", "RETRY        1", "SENT         3", "DEAD         1", "backlog      8"} {
		if !strings.Contains(out, line) {
			t.Fatalf("stats text lacks %q:\n%s", line, out)
		}
	}
}
