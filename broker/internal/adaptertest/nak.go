package adaptertest

import (
	"context"
	"testing"
	"time"

	"github.com/txbox/txbox/broker"
)

// NakLadder receives m, the one message on s's topic, once per delay and
// checks each delivery: it came back no sooner than the Nak before it
// asked, it is m (event, Raw's topic and id), and its Attempt counts up
// from 1. A delivery is Nak'd with its delay; at the first negative one it
// is acknowledged instead, and a second Ack must fail.
func NakLadder(ctx context.Context, t testing.TB, s broker.Subscriber, m broker.Message, delays ...time.Duration) {
	t.Helper()
	var nakAt time.Time
	var lastDelay time.Duration
	for i, delay := range delays {
		ds, err := s.Receive(ctx, 5)
		switch {
		case err != nil:
			t.Fatalf("delivery %d: %v", i+1, err)
		case len(ds) != 1:
			t.Fatalf("delivery %d: %d deliveries, want 1", i+1, len(ds))
		}
		d := ds[0]
		if el := time.Since(nakAt); el < lastDelay {
			t.Errorf("delivery %d came back %v after Nak(%v)", i+1, el, lastDelay)
		}
		if e, err := d.Event(); err != nil || e.ID != m.Event.ID {
			t.Fatalf("delivery %d: %v %v", i+1, e.ID, err)
		}
		if raw := d.Raw(); raw.Topic != m.Topic || raw.ID != m.Event.ID {
			t.Errorf("delivery %d: Raw().Topic %q ID %q", i+1, raw.Topic, raw.ID)
		}
		if a := d.Attempt(); a != i+1 {
			t.Errorf("delivery %d: Attempt() = %d", i+1, a)
		}
		if delay < 0 {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			if err := d.Ack(ctx); err == nil {
				t.Error("second Ack succeeded")
			}
			return
		}
		nakAt, lastDelay = time.Now(), delay
		if err := d.Nak(ctx, delay); err != nil {
			t.Fatal(err)
		}
	}
}
