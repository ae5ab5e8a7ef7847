package relay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
)

// lying returns too few results for its first calls, then delegates.
type lying struct {
	broker.Publisher
	lies atomic.Int64
}

func (l *lying) Publish(ctx context.Context, msgs []broker.Message) []error {
	if l.lies.Add(-1) >= 0 {
		return nil
	}
	return l.Publisher.Publish(ctx, msgs)
}

// A publisher returning the wrong number of results must not leak the
// claim: the rows go to RETRY at once (not after the 30 s lease, and not
// never, as with a transaction claim left open) and are delivered later.
func TestMiscountingPublisherReleasesTheClaim(t *testing.T) {
	for _, claims := range []string{"auto", "lease"} {
		t.Run(claims, func(t *testing.T) {
			s := openPG(t)
			b := membroker.New(membroker.Options{})
			p := &lying{Publisher: b}
			p.lies.Store(2)
			write(t, s, testenv.Backlog(6, 3, "E")...)
			r, _, _ := run(t, relay.Config{Store: s, Publisher: p, Claims: relay.ClaimMode(claims), Lease: 30 * time.Second,
				BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
			testenv.WaitFor(t, time.Minute, "all six delivered", func() bool { return len(b.Messages()) >= 6 })
			if r.Stats().Retried == 0 {
				t.Fatal("the miscounted round was not recorded as a retry")
			}
			if got := r.Stats().Errors; got != 0 {
				t.Fatalf("%d batch errors", got)
			}
		})
	}
}
