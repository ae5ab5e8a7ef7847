package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// commitLog watches a store's transaction claims from outside the relay: it
// records which claims are open at once and every commit's sent rows, and
// checks at each commit that no row counts as sent while an earlier row of
// its aggregate (by id, among the rows written) does not. It learns what
// was written from the test, not from the relay.
type commitLog struct {
	*postgres.Store
	hideChain bool // claim with ClaimTx only, as a store without chaining

	mu        sync.Mutex
	written   map[string][]int64 // aggregate -> ids, ascending
	sent      map[int64]bool
	open      map[*watched]bool
	maxShared int // most open claims that held rows of one aggregate at once
	failNext  map[string]bool
	failEvery int // fail every failEvery-th commit (0: none)
	commits   int
	violation error
}

func newCommitLog(s *postgres.Store) *commitLog {
	return &commitLog{Store: s, sent: map[int64]bool{}, open: map[*watched]bool{}, failNext: map[string]bool{}}
}

// storeView is what the relay sees: with hideChain, no ClaimTxChained.
func (c *commitLog) storeView() store.Store {
	if c.hideChain {
		return plainTx{Store: c.Store, c: c}
	}
	return c
}

// plainTx hides ClaimTxChained (and everything but store.Store and
// claimapi.TxClaimer) from the relay.
type plainTx struct {
	store.Store // an interface: no method of *postgres.Store beyond it
	c           *commitLog
}

func (p plainTx) ClaimTx(ctx context.Context, limit int) (claimapi.Claim, error) {
	return p.c.ClaimTx(ctx, limit)
}

func (c *commitLog) ClaimTx(ctx context.Context, limit int) (claimapi.Claim, error) {
	cl, err := c.Store.ClaimTx(ctx, limit)
	return c.watch(cl, err)
}

func (c *commitLog) ClaimTxChained(ctx context.Context, limit int) (claimapi.ChainedClaim, error) {
	cl, err := c.Store.ClaimTxChained(ctx, limit)
	if err != nil {
		return nil, err
	}
	w, _ := c.watch(cl, nil)
	return w.(claimapi.ChainedClaim), nil
}

func (c *commitLog) learn(ids map[string][]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written = ids
}

// failCommitOf makes the next commit of a claim holding rows of agg fail
// (the claim is aborted instead, as when the connection drops at COMMIT).
func (c *commitLog) failCommitOf(agg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext[agg] = true
}

func (c *commitLog) watch(cl claimapi.Claim, err error) (claimapi.Claim, error) {
	if err != nil || len(cl.Records()) == 0 {
		return cl, err
	}
	w := &watched{Claim: cl, log: c}
	w.chained, _ = cl.(claimapi.ChainedClaim)
	c.mu.Lock()
	c.open[w] = true
	byAgg := map[string]int{}
	for o := range c.open {
		for a := range aggsOf(o.Records()) {
			byAgg[a]++
		}
	}
	for _, n := range byAgg {
		c.maxShared = max(c.maxShared, n)
	}
	c.mu.Unlock()
	return w, nil
}

// drained waits until the relay delivered all n events and nothing is left
// to claim, then checks first-delivery order and the commits.
func (c *commitLog) drained(t *testing.T, r *relay.Relay, b *membroker.Broker, n int, d time.Duration) drainStats {
	t.Helper()
	testenv.WaitFor(t, d, "the backlog delivered", func() bool { return distinct(b.Messages()) == n && claimable(t, c.Store) == 0 })
	checkOrder(t, b.Messages(), n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.violation != nil {
		t.Fatal(c.violation)
	}
	return drainStats{r.Stats(), r.ChainStats()}
}

// drainStats is what a drained relay counted, chain internals included.
type drainStats struct {
	relay.Stats
	relay.ChainStats
}

func (c *commitLog) mostShared() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxShared
}

func aggsOf(recs []store.Record) map[string]bool {
	out := map[string]bool{}
	for _, r := range recs {
		out[r.AggregateID] = true
	}
	return out
}

type watched struct {
	claimapi.Claim
	chained claimapi.ChainedClaim // nil for ClaimTx's claims
	log     *commitLog
}

func (w *watched) Release(ids []int64) { w.chained.Release(ids) }

func (w *watched) Finish(ctx context.Context, sent []int64, failures []store.Failure) error {
	c := w.log
	c.mu.Lock()
	delete(c.open, w)
	if c.commits++; c.failEvery > 0 && c.commits%c.failEvery == 0 {
		c.mu.Unlock()
		w.Claim.Abort()
		return fmt.Errorf("injected: commit %d failed", c.commits)
	}
	for a := range aggsOf(w.Records()) {
		if c.failNext[a] {
			delete(c.failNext, a)
			c.mu.Unlock()
			w.Claim.Abort()
			return fmt.Errorf("injected: commit of a claim holding %s failed", a)
		}
	}
	c.mu.Unlock()
	err := w.Claim.Finish(ctx, sent, failures)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	byID := map[int64]store.Record{}
	for _, r := range w.Records() {
		byID[r.ID] = r
	}
	for _, f := range failures {
		if f.Dead {
			c.sent[f.ID] = true // DEAD does not hold its aggregate back
		}
	}
	for _, id := range sent {
		c.sent[id] = true
	}
	for _, id := range sent {
		for _, earlier := range c.written[byID[id].AggregateID] {
			if earlier >= id {
				break
			}
			if !c.sent[earlier] && c.violation == nil {
				c.violation = fmt.Errorf("row %d of %s committed as sent while its earlier row %d is not", id, byID[id].AggregateID, earlier)
			}
		}
	}
	return nil
}

func (w *watched) Abort() {
	w.log.mu.Lock()
	delete(w.log.open, w)
	w.log.mu.Unlock()
	w.Claim.Abort()
}

// writeLearn writes per events to each of aggs (interleaved) and tells log
// their ids.
func writeLearn(t *testing.T, s *postgres.Store, log *commitLog, aggs []string, per int) int {
	t.Helper()
	evs := testenv.Interleaved("Order", per, aggs...)
	write(t, s, evs...)
	recs, err := s.List(context.Background(), store.Filter{Limit: len(evs) + 1})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][]int64{}
	for _, r := range recs {
		ids[r.AggregateID] = append(ids[r.AggregateID], r.ID)
	}
	for _, l := range ids {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	}
	log.learn(ids)
	return len(evs)
}

// TestChainedClaimsOneAggregate: with a store that chains claims, a relay's
// batches hold rows of one hot aggregate at once (the second claims behind
// the first instead of finding nothing), first deliveries stay in order and
// no row is committed as sent before an earlier one. The control, the same
// store without ClaimTxChained, never has two batches on one aggregate.
func TestChainedClaimsOneAggregate(t *testing.T) {
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("hideChain=%v", hide), func(t *testing.T) {
			s := openPG(t)
			log := newCommitLog(s)
			log.hideChain = hide
			n := writeLearn(t, s, log, []string{"hot", "warm"}, 400)
			b := membroker.New(membroker.Options{})
			r, _, _ := run(t, relay.Config{Store: log.storeView(), Publisher: slowPublisher{b, time.Millisecond}, BatchSize: 50, Workers: 3})
			st := log.drained(t, r, b, n, 60*time.Second)
			maxShared := log.mostShared()
			t.Logf("most claims holding one aggregate at once: %d; chained lanes %d, chain waits %d", maxShared, st.Chained, st.ChainWaits)
			if hide {
				if maxShared != 1 || st.Chained != 0 {
					t.Fatalf("without chaining, %d claims held one aggregate at once (chained %d); want 1", maxShared, st.Chained)
				}
				return
			}
			if maxShared < 2 || st.Chained == 0 {
				t.Fatalf("chained claims: at most %d claims held one aggregate at once (chained lanes %d); want 2 or more", maxShared, st.Chained)
			}
		})
	}
}

// gate fails the first publish of one event (retryable) and holds that
// failure back until the relay has claimed a batch behind it, so the batch
// behind is sure to see an earlier batch that gave its rows up.
type gate struct {
	broker.Publisher
	r      atomic.Pointer[relay.Relay]
	failID string
	once   sync.Once
}

func (g *gate) Publish(ctx context.Context, msgs []broker.Message) []error {
	time.Sleep(time.Millisecond)
	errs := g.Publisher.Publish(ctx, msgs)
	for i, m := range msgs {
		if m.Event.ID != g.failID {
			continue
		}
		g.once.Do(func() {
			deadline := time.Now().Add(10 * time.Second)
			for (g.r.Load() == nil || g.r.Load().ChainStats().Chained == 0) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			errs[i] = fmt.Errorf("%w: injected", txbox.ErrBrokerUnavailable)
			// What the broker did with the events after it in this round
			// does not matter: they are released and sent again.
			for j := i + 1; j < len(errs); j++ {
				if msgs[j].Event.AggregateID == m.Event.AggregateID {
					errs[j] = fmt.Errorf("%w: behind a failure", txbox.ErrBrokerUnavailable)
				}
			}
		})
	}
	return errs
}

// TestChainedClaimBehindAFailure: a publish fails in the middle of one
// aggregate's batch while the next batch holds that aggregate's later rows.
// The later batch must publish none of them before the failed event and
// count none as sent: first deliveries stay in order (the failed event is
// first delivered after its retry, and everything behind it after that).
func TestChainedClaimBehindAFailure(t *testing.T) {
	s := openPG(t)
	log := newCommitLog(s)
	n := writeLearn(t, s, log, []string{"hot"}, 300)
	recs, err := s.List(context.Background(), store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
	b := membroker.New(membroker.Options{})
	g := &gate{Publisher: b, failID: recs[20].EventID}
	r, _, _ := run(t, relay.Config{Store: log, Publisher: g, BatchSize: 50, Workers: 2,
		BackoffBase: 50 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	g.r.Store(r)
	st := log.drained(t, r, b, n, 60*time.Second)
	t.Logf("chained lanes %d, rows released behind the failure %d, retried %d", st.Chained, st.ChainReleased, st.Retried)
	if st.ChainReleased == 0 {
		t.Fatal("no row was released behind the failed batch: the test did not exercise a chain")
	}
	// Only the batches claimed before the failure was known go back: once
	// their rows are released in the store, claims stop behind them.
	if st.ChainReleased > 2*50 {
		t.Fatalf("%d rows released for one failure: later claims kept chaining behind released batches", st.ChainReleased)
	}
}

// TestChainedClaimBehindAFailedCommit: the batch ahead publishes everything
// but its commit fails, so its rows stay unsent; the batch behind, which
// published the aggregate's later rows meanwhile, must not commit them as
// sent. They all come back and are delivered again, in order.
func TestChainedClaimBehindAFailedCommit(t *testing.T) {
	s := openPG(t)
	log := newCommitLog(s)
	n := writeLearn(t, s, log, []string{"hot"}, 300)
	b := membroker.New(membroker.Options{})
	// The first claim holding "hot" fails at its commit.
	log.failCommitOf("hot")
	r, _, _ := run(t, relay.Config{Store: log, Publisher: slowPublisher{b, 2 * time.Millisecond}, BatchSize: 50, Workers: 2})
	st := log.drained(t, r, b, n, 60*time.Second)
	t.Logf("chained lanes %d, rows released behind the failed commit %d, messages %d for %d events", st.Chained, st.ChainReleased, len(b.Messages()), n)
	if st.ChainReleased == 0 {
		t.Fatal("no row was released behind the failed commit: the test did not exercise a chain")
	}
	if st.ChainReleased > 2*50 {
		t.Fatalf("%d rows released for one failed commit: later claims kept chaining behind released batches", st.ChainReleased)
	}
}

// flaky fails about one publish in every n (retryable), at random, and
// whatever follows it in the round for the same aggregate.
type flaky struct {
	broker.Publisher
	n int
}

func (f flaky) Publish(ctx context.Context, msgs []broker.Message) []error {
	time.Sleep(200 * time.Microsecond)
	errs := f.Publisher.Publish(ctx, msgs)
	failed := map[string]bool{}
	for i, m := range msgs {
		if failed[m.Event.AggregateID] || rand.IntN(f.n) == 0 {
			failed[m.Event.AggregateID] = true
			errs[i] = fmt.Errorf("%w: injected", txbox.ErrBrokerUnavailable)
		}
	}
	return errs
}

// TestChainedClaimsUnderFaults: hot aggregates, many batches in flight, and
// publishes and commits failing at random. Whatever the interleaving, every
// event arrives, first deliveries keep each aggregate's order, and no row
// is committed as sent before an earlier row of its aggregate.
func TestChainedClaimsUnderFaults(t *testing.T) {
	s := openPG(t)
	log := newCommitLog(s)
	log.failEvery = 7
	n := writeLearn(t, s, log, []string{"h1", "h2", "h3", "h4", "h5"}, 200)
	b := membroker.New(membroker.Options{})
	r, _, _ := run(t, relay.Config{Store: log, Publisher: flaky{b, 40}, BatchSize: 25, Workers: 4,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 5 * time.Millisecond, MaxAttempts: 1000})
	st := log.drained(t, r, b, n, 90*time.Second)
	t.Logf("chained lanes %d, chain waits %d, rows released behind others %d, retried %d, commits %d, messages %d for %d events",
		st.Chained, st.ChainWaits, st.ChainReleased, st.Retried, log.commits, len(b.Messages()), n)
	if st.Chained == 0 || st.ChainReleased == 0 {
		t.Fatal("no chain formed or none was released: the faults did not meet a chain")
	}
}
