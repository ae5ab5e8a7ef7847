package natsbroker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/internal/testenv"
)

// TestConformanceAtomicBatch runs brokertest on a nats-server 2.15 of the
// test's own (built from the module: the service and the Debian package are
// 2.9, without atomic batch publish). The publisher must find that the
// server and the stream it creates allow atomic batches and declare
// PipelinesPerKey, so the Pipelined cases run.
func TestConformanceAtomicBatch(t *testing.T) {
	srv := testenv.StartNATSBinary(t, testenv.NATSModuleBinary(t))
	waitJetStream(t, srv.URL)
	conformance(t, srv.URL, func(*testing.T) { srv.Kill() }, func(*testing.T) { srv.Start() }, true)
}

// afterFailure runs the armed hook once, after a Publish call in which a
// message failed: the harness lifts the limit that made it fail, so the
// failure happens once, as FailPublishAfter promises.
type afterFailure struct {
	*natsbroker.Publisher
	hook *atomic.Pointer[func()]
}

func (a *afterFailure) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := a.Publisher.Publish(ctx, msgs)
	for _, err := range errs {
		if err != nil {
			if f := a.hook.Swap(nil); f != nil {
				(*f)()
			}
			break
		}
	}
	return errs
}

// limitStream lets n more messages into the stream and refuses the next
// ones (max_msgs with discard new: "maximum messages exceeded", which the
// stream may accept later, so retryable), until a Publish call saw a
// failure; then the limit goes.
func limitStream(t *testing.T, nc *nats.Conn, stream string, n int, hook *atomic.Pointer[func()]) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orig := info.Config
	limited := orig
	limited.MaxMsgs = int64(info.State.Msgs) + int64(n)
	limited.Discard = jetstream.DiscardNew
	if _, err := js.UpdateStream(ctx, limited); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	lift := func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.UpdateStream(ctx, orig); err != nil {
			t.Error(fmt.Errorf("lift the stream limit: %w", err))
		}
	}
	hook.Store(&lift)
	t.Cleanup(lift)
}
