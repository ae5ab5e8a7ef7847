package adaptertest

import (
	"context"
	"sync"
	"testing"

	"github.com/txbox/txbox/broker"
)

// PublishConcurrently publishes from goroutines goroutines at once, each
// n messages of the key "k" to topic(g) in one call, and fails the test on
// any error.
func PublishConcurrently(ctx context.Context, t testing.TB, p broker.Publisher, goroutines, n int, topic func(g int) string) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i, err := range p.Publish(ctx, Msgs(topic(g), "k", n)) {
				if err != nil {
					t.Errorf("goroutine %d message %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// PublishOK publishes msgs in one call and fails the test unless every one
// is confirmed.
func PublishOK(ctx context.Context, t testing.TB, p broker.Publisher, msgs []broker.Message) {
	t.Helper()
	errs := p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("Publish returned %d results for %d messages", len(errs), len(msgs))
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Publish message %d (%s on %q): %v", i, msgs[i].Event.ID, msgs[i].Topic, err)
		}
	}
}

// Msgs are n messages of aggregate key on topic, numbered from 0 as Msg
// numbers them.
func Msgs(topic, key string, n int) []broker.Message {
	msgs := make([]broker.Message, n)
	for i := range msgs {
		msgs[i] = Msg(topic, key, i)
	}
	return msgs
}
