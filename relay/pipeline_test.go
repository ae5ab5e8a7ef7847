package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// calls counts a publisher's Publish calls and declares what the test
// says about per-key pipelining.
type calls struct {
	broker.Publisher
	pipelines bool
	n         atomic.Int64
}

func (c *calls) Publish(ctx context.Context, msgs []broker.Message) []error {
	c.n.Add(1)
	return c.Publisher.Publish(ctx, msgs)
}

func (c *calls) PipelinesPerKey() bool { return c.pipelines }

// storesAll fails the message at index fail (counted over all its calls)
// and stores every other one, even the later messages of the failed key:
// a broker that breaks the promise OrderedPipeliner asks for.
type storesAll struct {
	*membroker.Broker
	seen atomic.Int64
	fail int64
}

func (s *storesAll) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if s.seen.Add(1)-1 == s.fail {
			errs[i] = txbox.Unavailable(errors.New("injected"))
			continue
		}
		errs[i] = s.Broker.Publish(ctx, []broker.Message{m})[0]
	}
	return errs
}

// With a publisher that keeps per-key order in flight, one aggregate's
// events go out in one round, not one round trip each; without the
// declaration, one at a time as before.
func TestPipelinedRunsOneAggregate(t *testing.T) {
	for _, pipelines := range []bool{true, false} {
		t.Run(fmt.Sprint("pipelines=", pipelines), func(t *testing.T) {
			s := openPG(t)
			write(t, s, testenv.Backlog(50, 1, "E")...)
			b := membroker.New(membroker.Options{})
			p := &calls{Publisher: b, pipelines: pipelines}
			r, err := relay.New(relay.Config{Store: s, Publisher: p})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := r.RunOnce(context.Background()); n != 50 || err != nil {
				t.Fatalf("RunOnce: %d, %v", n, err)
			}
			want := int64(50)
			if pipelines {
				want = 1
			}
			if got := p.n.Load(); got != want {
				t.Fatalf("%d publish rounds for 50 events of one aggregate, want %d", got, want)
			}
			checkOrder(t, b.Messages(), 50)
		})
	}
}

// The 3rd of 10 pipelined messages of one aggregate fails (retryable):
// rows 1-2 are SENT, row 3 goes to RETRY and 4-10 are released PENDING,
// whether the broker stored nothing after the failure (membroker, as the
// declaration promises) or everything (then 4-10 are duplicates, never
// counted as delivered). After the retry every event is delivered, and
// with the promise kept the first deliveries are in order.
func TestPipelinedFailureInTheMiddle(t *testing.T) {
	for _, storeAll := range []bool{false, true} {
		t.Run(fmt.Sprint("broker-stores-later=", storeAll), func(t *testing.T) {
			ctx := context.Background()
			s := openPG(t)
			evs := testenv.Backlog(10, 1, "E")
			write(t, s, evs...)
			b := membroker.New(membroker.Options{})
			var p broker.Publisher = &calls{Publisher: b, pipelines: true}
			if storeAll {
				p = &calls{Publisher: &storesAll{Broker: b, fail: 2}, pipelines: true}
			} else {
				b.FailAfter(2, 1, txbox.Unavailable(errors.New("injected")))
			}
			cfg := relay.Config{Store: s, Publisher: p, BackoffBase: 100 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
			r, err := relay.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := r.RunOnce(ctx); n != 10 || err != nil {
				t.Fatalf("RunOnce: %d, %v", n, err)
			}
			recs, err := s.List(ctx, store.Filter{AggregateID: "o-0", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			status := map[string]txbox.Status{}
			for _, rec := range recs {
				status[rec.EventID] = rec.Status
			}
			for i, e := range evs {
				want := txbox.StatusPending
				switch {
				case i < 2:
					want = txbox.StatusSent
				case i == 2:
					want = txbox.StatusRetry
				}
				if status[e.ID] != want {
					t.Errorf("row %d: %s, want %s", i+1, status[e.ID], want)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			run(t, cfg)
			waitSent(t, s, 10, 15*time.Second, "all 10 SENT after the retry")
			if !storeAll {
				checkOrder(t, b.Messages(), 10)
			}
		})
	}
}
