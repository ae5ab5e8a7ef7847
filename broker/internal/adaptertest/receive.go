package adaptertest

import (
	"context"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// Receive receives from s until n deliveries came and returns them. each,
// when not nil, sees every delivery as it arrives, to acknowledge it: a
// broker holds back what is beyond its window of unacknowledged ones. It
// fails the test when a Receive fails (ctx ended first), returns nothing
// without an error, or returns more than asked.
func Receive(ctx context.Context, t testing.TB, s broker.Subscriber, n int, each func(broker.Delivery)) []broker.Delivery {
	t.Helper()
	var got []broker.Delivery
	for len(got) < n {
		ds, err := s.Receive(ctx, n-len(got))
		switch {
		case err != nil:
			t.Fatalf("Receive after %d of %d deliveries: %v", len(got), n, err)
		case len(ds) == 0:
			t.Fatal("Receive returned no deliveries and no error")
		case len(ds) > n-len(got):
			t.Fatalf("Receive(max=%d) returned %d deliveries", n-len(got), len(ds))
		}
		for _, d := range ds {
			if each != nil {
				each(d)
			}
		}
		got = append(got, ds...)
	}
	return got
}

// Each receives n deliveries from s as Receive does and hands each, with
// its decoded event, to f as it arrives: f acknowledges it or not.
func Each(ctx context.Context, t testing.TB, s broker.Subscriber, n int, f func(broker.Delivery, txbox.Event)) {
	t.Helper()
	Receive(ctx, t, s, n, func(d broker.Delivery) {
		e, err := d.Event()
		if err != nil {
			t.Fatalf("Event of %s: %v", d.Raw().ID, err)
		}
		f(d, e)
	})
}

// One receives one delivery from s and decodes it, failing the test when
// either fails.
func One(ctx context.Context, t testing.TB, s broker.Subscriber) (broker.Delivery, txbox.Event) {
	t.Helper()
	d := Receive(ctx, t, s, 1, nil)[0]
	e, err := d.Event()
	if err != nil {
		t.Fatalf("Event of %s: %v", d.Raw().ID, err)
	}
	return d, e
}
