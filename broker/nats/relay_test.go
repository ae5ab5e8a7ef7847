package natsbroker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
)

// rounds counts Publish calls of the publisher it wraps.
type rounds struct {
	*natsbroker.Publisher
	n atomic.Int64
}

func (r *rounds) Publish(ctx context.Context, msgs []broker.Message) []error {
	r.n.Add(1)
	return r.Publisher.Publish(ctx, msgs)
}

// A backlog of 5,000 events of ONE aggregate drains through a relay with
// default flags into a nats-server 2.15 stream with atomic batches: in
// runs (far fewer publish rounds than events), every event stored once, in
// outbox order.
func TestRelayDrainsOneAggregateInBatches(t *testing.T) {
	url := server215(t)
	prefix := adaptertest.Unique("ab.relay")
	stream := streamName(prefix)
	p := &rounds{Publisher: adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream, Subjects: []string{prefix + ".>"}, CreateStream: true})}
	if !broker.PipelinesPerKey(p) {
		t.Fatal("the publisher does not declare pipelining on 2.15")
	}
	s := storeenv.OpenPostgres(t, postgres.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	evs := make([]txbox.Event, n)
	for i := range evs {
		evs[i] = txbox.MustEvent("Order", "hot", "Created", map[string]int{"i": i})
	}
	if err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		return pgxtx.Add(ctx, tx, outbox.NewWriter(s.Dialect()), evs...)
	}); err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: s, Publisher: p, Topic: broker.Topic(prefix + ".{aggregate_type}.{event_type}"), Logger: adaptertest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Run(rctx) }()
	for {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Counts[txbox.StatusSent] == n {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("backlog not drained: %v", st.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	stop()
	if err := <-done; err != nil && ctx.Err() == nil && err != context.Canceled {
		t.Fatalf("relay: %v", err)
	}
	st := r.Stats()
	t.Logf("%d events of one aggregate in %v (%.0f/s), %d publish rounds; claims %v, publishes %v, marks %v",
		n, took, n/took.Seconds(), p.n.Load(), st.ClaimTime, st.PublishTime, st.MarkTime)
	if got := p.n.Load(); got > n/10 {
		t.Fatalf("%d publish rounds for %d events of one aggregate: not pipelined", got, n)
	}
	ids, _ := storedIDs(t, url, stream, prefix+".Order.Created")
	want := make([]string, n)
	for i, e := range evs {
		want[i] = e.ID
	}
	sameIDs(t, "stream", ids, want)
}
