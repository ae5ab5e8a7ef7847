package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// splitRows writes aggs aggregates of per rows each.
func splitRows(t *testing.T, s *postgres.Store, aggs, per int) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), `INSERT INTO `+s.Tables().Outbox+`
		(event_id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid()::text, 'T', 'a' || (g % $1::int), 'E', '{}' FROM generate_series(0, $1::int * $2::int - 1) g ORDER BY g`, aggs, per)
	if err != nil {
		t.Fatal(err)
	}
}

// claimAggs claims up to limit rows with a transaction claim and returns
// the claim and the aggregates it holds.
func claimAggs(t *testing.T, s *postgres.Store, limit int) (claimapi.Claim, map[string]int) {
	t.Helper()
	c, err := s.ClaimTx(context.Background(), limit)
	if err != nil {
		t.Fatal(err)
	}
	aggs := map[string]int{}
	for _, r := range c.Records() {
		aggs[r.AggregateID]++
	}
	return c, aggs
}

// twoStores opens a migrated store with opts and a second store on its table
// (a second relay's), closed when t ends.
func twoStores(t *testing.T, opts postgres.Options) (a, b *postgres.Store) {
	t.Helper()
	a = migratedStore(t, opts)
	b, err := postgres.New(a.Pool(), postgres.Options{Tables: a.Tables()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return a, b
}

func split(t *testing.T, s *postgres.Store) func() {
	t.Helper()
	leave, err := s.Split(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return leave
}

// Two split stores on one table (two relays) claim disjoint aggregates,
// each its share: neither claim meets the other's rows. Without the split,
// the first claim takes rows of every aggregate.
func TestSplitClaimsDisjointAggregates(t *testing.T) {
	for _, kind := range []string{"transaction", "lease"} {
		t.Run(kind, func(t *testing.T) {
			a, b := twoStores(t, postgres.Options{})
			defer split(t, a)()
			defer split(t, b)()
			const aggs, per = 40, 5
			splitRows(t, a, aggs, per)

			claim := func(s *postgres.Store) map[string]int {
				if kind == "transaction" {
					c, got := claimAggs(t, s, 1000)
					t.Cleanup(c.Abort)
					return got
				}
				recs, err := s.Claim(context.Background(), store.ClaimRequest{Lease: fmt.Sprintf("%p", s), Limit: 1000, LeaseFor: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int{}
				for _, r := range recs {
					got[r.AggregateID]++
				}
				return got
			}
			ga := claim(a)
			gb := claim(b)
			t.Logf("first store: %d aggregates, second: %d", len(ga), len(gb))
			if len(ga) == 0 || len(gb) == 0 || len(ga) == aggs || len(gb) == aggs {
				t.Fatalf("split claims took %d and %d of %d aggregates, want each a share", len(ga), len(gb), aggs)
			}
			for agg, n := range ga {
				if _, both := gb[agg]; both {
					t.Fatalf("aggregate %s claimed by both stores", agg)
				}
				if n != per {
					t.Fatalf("aggregate %s: %d of its %d rows claimed, want all", agg, n, per)
				}
			}
			if len(ga)+len(gb) != aggs {
				t.Fatalf("the two shares cover %d of %d aggregates", len(ga)+len(gb), aggs)
			}
		})
	}
}

// A member that leaves, closes, or loses its connection hands its share to
// the others at their next claim: no timeout to wait out.
func TestSplitShareTakenOverAtOnce(t *testing.T) {
	for _, how := range []string{"leave", "close", "connection killed"} {
		t.Run(how, func(t *testing.T) {
			a, b := twoStores(t, postgres.Options{})
			defer split(t, a)()
			leaveB := split(t, b)
			defer leaveB()
			const aggs = 40
			splitRows(t, a, aggs, 2)
			c, got := claimAggs(t, a, 1000)
			c.Abort()
			if len(got) == aggs {
				t.Fatalf("with two members, one claim took all %d aggregates", aggs)
			}
			switch how {
			case "leave":
				leaveB()
			case "close":
				b.Close()
			case "connection killed":
				// The member connection is the one holding the table's
				// advisory lock that is not the first store's.
				if _, err := a.Pool().Exec(context.Background(), `SELECT pg_terminate_backend(l.pid) FROM pg_locks l
					WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.objid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
					t.Fatal(err)
				}
			}
			// Leave and Close return after the lock is released; a killed
			// backend releases it as it exits.
			deadline := time.Now().Add(5 * time.Second)
			for {
				c, got = claimAggs(t, a, 1000)
				c.Abort()
				if len(got) == aggs || time.Now().After(deadline) {
					break
				}
				if how != "connection killed" {
					t.Fatalf("after the other member's %s, a claim took %d of %d aggregates, want all at once", how, len(got), aggs)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(got) != aggs {
				t.Fatalf("after the other member's %s, claims take %d of %d aggregates", how, len(got), aggs)
			}
		})
	}
}

// A member whose connection was lost claims every aggregate meanwhile, and
// takes a member lock again once it can: the split comes back.
func TestSplitRejoinsAfterLostConnection(t *testing.T) {
	a, b := twoStores(t, postgres.Options{})
	defer split(t, a)()
	defer split(t, b)()
	const aggs = 40
	splitRows(t, a, aggs, 2)
	if _, err := a.Pool().Exec(context.Background(), `SELECT pg_terminate_backend(l.pid) FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.objid = 0 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		t.Fatal(err)
	}
	// The first store's lock (slot 0) is gone: its claims see that it is no
	// member and take every aggregate, until its keeper rejoins.
	phase := func(what string, ok func(n int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, got := claimAggs(t, a, 1000)
			c.Abort()
			if ok(len(got)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("10 s after its member connection was killed, claims take %d of %d aggregates, want %s", len(got), aggs, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	phase("all while it is no member", func(n int) bool { return n == aggs })
	phase("a share again once it rejoined", func(n int) bool { return n > 0 && n < aggs })
}

// NoSplit keeps a store's claims on every aggregate (a pooler in
// transaction mode cannot keep the session lock).
func TestNoSplit(t *testing.T) {
	a, b := twoStores(t, postgres.Options{NoSplit: true})
	defer split(t, a)()
	defer split(t, b)()
	splitRows(t, a, 40, 2)
	c, got := claimAggs(t, a, 1000)
	c.Abort()
	if len(got) != 40 {
		t.Fatalf("a NoSplit store claimed %d of 40 aggregates", len(got))
	}
}

// A member's claim window is as many times wider as there are members: its
// share of the window, less its own rows in flight, still holds a batch, so
// a claim behind its own batches does not come back short and run the
// fallback (whose scan grows with the backlog). Sized for one relay, the
// third claim below got 249 of its 500 rows.
func TestSplitWindowCoversTheShare(t *testing.T) {
	a, b := twoStores(t, postgres.Options{})
	defer split(t, a)()
	defer split(t, b)()
	if n := postgres.SplitMembers(b); n != 2 {
		t.Fatalf("the second member counted %d members at joining, want 2", n)
	}
	// The first member counts again at its next connection check.
	deadline := time.Now().Add(5 * time.Second)
	for postgres.SplitMembers(a) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the first member still counts %d members after 5 s, want 2", postgres.SplitMembers(a))
		}
		time.Sleep(50 * time.Millisecond)
	}
	const aggs, per, limit = 1000, 6, 500
	splitRows(t, a, aggs, per)
	ctx := context.Background()
	for range 2 { // two batches in flight
		c, err := b.ClaimTxChained(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
	}
	before := postgres.Fallbacks(b)
	c, err := b.ClaimTxChained(ctx, limit)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	if got := len(c.Records()); got != limit {
		t.Fatalf("a claim behind two batches in flight took %d rows, want %d", got, limit)
	}
	if n := postgres.Fallbacks(b) - before; n != 0 {
		t.Fatalf("a claim behind two batches in flight ran the fallback claim (%d), want its window to hold a batch of its share", n)
	}
}

// A store claims without the split and the busy check only while it is the
// only member of its table's split, as last counted: a second member turns
// both back to the shared claim within a count (every second), and its
// leaving turns the first alone again. Alone, a row another transaction
// locks still ends its aggregate's run (the row locks keep the order, not
// the busy check).
func TestClaimAloneOnlyWhileOnlyMember(t *testing.T) {
	ctx := context.Background()
	a, b := twoStores(t, postgres.Options{})
	defer split(t, a)()
	if !postgres.ClaimAlone(a) {
		t.Fatal("the only member does not claim alone")
	}
	splitRows(t, a, 4, 3)
	tx, err := a.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var locked int64
	if err := tx.QueryRow(ctx, `SELECT id FROM `+a.Tables().Outbox+` WHERE aggregate_id = 'a0' ORDER BY id LIMIT 1 FOR UPDATE`).Scan(&locked); err != nil {
		t.Fatal(err)
	}
	c, got := claimAggs(t, a, 100)
	c.Abort()
	if got["a0"] != 0 || len(got) != 3 {
		t.Fatalf("alone, with the head of a0 locked elsewhere, a claim took %v; want every row of a1-a3 and none of a0", got)
	}
	_ = tx.Rollback(ctx)

	leaveB := split(t, b)
	if postgres.ClaimAlone(b) {
		t.Fatal("the second member claims alone")
	}
	waitAlone := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for postgres.ClaimAlone(a) != want {
			if time.Now().After(deadline) {
				t.Fatalf("claims alone %v for 5 s, want %v", !want, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAlone(false)
	leaveB()
	waitAlone(true)
}
