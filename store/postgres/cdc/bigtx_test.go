package cdc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// gate publishes through the broker until it has taken limit messages,
// then holds every later Publish until it is opened (or the call's ctx
// ends, which fails the call as a broker outage would).
type gate struct {
	*membroker.Broker
	mu    sync.Mutex
	taken int
	limit int
	open  chan struct{}
}

func (g *gate) Publish(ctx context.Context, msgs []broker.Message) []error {
	g.mu.Lock()
	held := g.taken >= g.limit
	g.taken += len(msgs)
	g.mu.Unlock()
	if held {
		select {
		case <-g.open:
		case <-ctx.Done():
			errs := make([]error, len(msgs))
			for i := range errs {
				errs[i] = txbox.ErrBrokerUnavailable
			}
			return errs
		}
	}
	return g.Broker.Publish(ctx, msgs)
}

// A transaction larger than the batch is delivered in parts: the rows of
// its first parts are archived while later parts wait for the broker, and
// the slot's position does not pass the transaction until all of it is
// delivered: a relay stopped in the middle reads the whole transaction
// again (had the position passed it, its last parts would be lost), every
// event arrives in order and the repeats carry their ids.
func TestLargeTransactionInParts(t *testing.T) {
	e := newEnv(t)
	slot := e.slot()
	g := &gate{Broker: membroker.New(membroker.Options{}), limit: 20, open: make(chan struct{})}
	small := func(c *cdc.Config) { c.BatchSize = 10 }
	r := e.start(slot, g, small)

	const n = 45
	counts := map[string]int{}
	var evs []txbox.Event
	for i := range n {
		agg := []string{"p", "q", "r"}[i%3]
		evs = append(evs, ev(agg, counts[agg]))
		counts[agg]++
	}
	e.write(false, evs...)

	// The first two parts are delivered and archived while the third waits.
	testenv.WaitFor(t, 20*time.Second, "first parts archived", func() bool { return e.countSent() >= 20 })
	if got := e.countSent(); got >= n {
		t.Fatalf("%d of %d rows archived while the broker holds the rest", got, n)
	}
	// Stopped in the middle, the next relay reads the transaction again.
	// (The step in flight finishes once the broker answers; the parts after
	// it are left to the slot.)
	r.cancel()
	close(g.open)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("relay did not stop")
	}
	r = e.start(slot, g, small)
	testenv.WaitFor(t, 20*time.Second, "every event", func() bool { f, _ := firsts(g.Messages()); return len(f) == n })
	got, dups := firsts(g.Messages())
	checkOrder(t, got, counts)
	if dups == 0 {
		t.Errorf("no event published again after a stop in the middle of a transaction")
	}
	testenv.WaitFor(t, time.Minute, "rows archived", func() bool { return e.countRows("PENDING") == 0 })
	if s := e.countSent(); s != n {
		t.Errorf("archive holds %d rows, want %d", s, n)
	}
	r.stop(t)
}
