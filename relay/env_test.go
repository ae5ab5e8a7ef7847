package relay_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/storetest"
)

// The relay tests' harness: stores on fresh tables, writes, a relay running
// until the test ends, and a publisher that fails on demand.

// openPG returns a migrated PostgreSQL store on fresh tables.
func openPG(t *testing.T) *postgres.Store {
	t.Helper()
	return storeenv.MigratedPostgres(t, postgres.Options{})
}

// write commits evs to s's outbox in one transaction.
func write(t *testing.T, s *postgres.Store, evs ...txbox.Event) {
	t.Helper()
	storeenv.Write(t, storeenv.Postgres{}, s, evs...)
}

// faulty fails every publish of the aggregates in fail, and of the topics
// in failTopic, with err (nil: an outage of the way out, as an adapter
// reports it) and delegates the rest.
type faulty struct {
	broker.Publisher
	mu        sync.Mutex
	fail      map[string]bool
	failTopic map[string]bool
	err       error
	delay     time.Duration
	calls     atomic.Int64
}

func (f *faulty) Publish(ctx context.Context, msgs []broker.Message) []error {
	f.calls.Add(1)
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
		}
	}
	var pass []broker.Message
	var idx []int
	errs := make([]error, len(msgs))
	f.mu.Lock()
	for i, m := range msgs {
		if f.fail[m.Event.AggregateID] || f.failTopic[m.Topic] {
			errs[i] = f.err
			if errs[i] == nil {
				errs[i] = fmt.Errorf("%w: injected", txbox.ErrBrokerUnavailable)
			}
			continue
		}
		pass = append(pass, m)
		idx = append(idx, i)
	}
	f.mu.Unlock()
	for j, err := range f.Publisher.Publish(ctx, pass) {
		errs[idx[j]] = err
	}
	return errs
}

// run runs a relay with cfg (polling every 10 ms unless cfg says) until
// the test ends; cancel stops it sooner and done is closed once it stopped.
func run(t *testing.T, cfg relay.Config) (*relay.Relay, context.CancelFunc, chan struct{}) {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, cancel, done
}

// waitSent waits up to d until n of s's rows are SENT, failing the test
// with what it waited for (as testenv.WaitFor) when d passes first.
func waitSent(t *testing.T, s store.Store, n int64, d time.Duration, what string) {
	t.Helper()
	testenv.WaitFor(t, d, what, func() bool {
		st, _ := s.Stats(context.Background())
		return st.Counts[txbox.StatusSent] == n
	})
}

// eachClaims runs fn once per claim mode on PostgreSQL: transaction-held
// claims (auto, the default there) and leases written into the rows.
func eachClaims(t *testing.T, fn func(t *testing.T, claims relay.ClaimMode)) {
	for _, m := range []relay.ClaimMode{relay.ClaimAuto, relay.ClaimLease} {
		t.Run(string(m), func(t *testing.T) { fn(t, m) })
	}
}

// claimable claims, as another relay would, every row it could take now and
// returns how many it got. A row still held, by a lease in the row or by the
// lock of a claim's transaction left open, is not among them. The probe's
// own lease keeps what it took: call it last, or on rows nobody else may get.
func claimable(t *testing.T, s store.Store) int {
	t.Helper()
	recs, err := s.Claim(context.Background(), store.ClaimRequest{Lease: "probe-" + txbox.NewID(), Limit: 1000, LeaseFor: time.Minute})
	if err != nil {
		t.Fatalf("probe claim: %v", err)
	}
	return len(recs)
}

// backend is a store a relay test runs on and the claim mode it runs in.
type backend struct {
	name   string
	claims relay.ClaimMode
	h      storetest.Harness
}

// backends are the stores of the tests that hold for every dialect:
// PostgreSQL with transaction-held claims and with leases, MariaDB, SQLite.
func backends() []backend {
	return []backend{
		{"postgres-tx", relay.ClaimAuto, storeenv.Postgres{}},
		{"postgres-lease", relay.ClaimLease, storeenv.Postgres{}},
		{"mariadb", relay.ClaimAuto, storeenv.MySQL{}},
		{"sqlite", relay.ClaimAuto, storeenv.SQLite{}},
	}
}

// open returns a migrated store of b's on fresh tables.
func (b backend) open(t *testing.T) store.Store {
	t.Helper()
	return storeenv.Migrated(t, b.h.Open(t))
}

// exec runs one statement on s in a transaction of b's and commits it.
func (b backend) exec(t *testing.T, s store.Store, stmt string) {
	t.Helper()
	storetest.InTx(t, b.h, s, func(tx store.Tx) error {
		_, err := tx.Exec(context.Background(), stmt)
		return err
	})
}
