package adaptertest

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox/broker"
)

// FirstDelivery checks that a Receive of up to 100 deliveries that has to
// wait returns as soon as one exists, without waiting to fill its batch:
// the inbox should start on a message at once. m is published after delay
// while the Receive waits; its delivery is returned, unacknowledged.
func FirstDelivery(ctx context.Context, t testing.TB, p broker.Publisher, s broker.Subscriber, m broker.Message, delay time.Duration) broker.Delivery {
	t.Helper()
	published := make(chan time.Time, 1)
	go func() {
		time.Sleep(delay)
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Publish(pctx, []broker.Message{m})[0]; err != nil {
			t.Error(err)
		}
		published <- time.Now()
	}()
	ds, err := s.Receive(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	at := <-published
	if len(ds) != 1 {
		t.Errorf("Receive returned %d deliveries, want 1", len(ds))
	}
	if lag := time.Since(at); lag > 2*time.Second {
		t.Errorf("Receive returned %v after the publish", lag)
	}
	return ds[0]
}
