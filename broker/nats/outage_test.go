package natsbroker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	natsbroker "github.com/txbox/txbox/broker/nats"
	"github.com/txbox/txbox/internal/testenv"
)

// ownStream makes a stream of the test's own on the server at url, for
// subjects under a unique prefix, and deletes it when the test ends.
func ownStream(t *testing.T, url, prefix string, storage jetstream.StorageType, d time.Duration) (string, jetstream.StreamConfig, jetstream.JetStream, context.Context) {
	t.Helper()
	prefix = adaptertest.Unique(prefix)
	cfg := jetstream.StreamConfig{Name: streamName(prefix), Subjects: []string{prefix + ".>"}, Storage: storage}
	js, ctx := jetStreamAt(t, url, d)
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
	return prefix, cfg, js, ctx
}

func publishOne(t *testing.T, p broker.Publisher, m broker.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Publish(ctx, []broker.Message{m})[0]
}

// TestStreamDeletedAndRecreated: the stream the publisher was opened on is
// deleted under it. Its events fail as an outage, naming the subject no
// stream captures, not as the events' own failure, and the same event is
// confirmed once the stream is there again.
func TestStreamDeletedAndRecreated(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_NATS")
	prefix, cfg, js, ctx := ownStream(t, url, "txboxtest.del", jetstream.MemoryStorage, 20*time.Second)
	p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: cfg.Name})
	m := adaptertest.Msg(prefix+".Order.Created", "k", 0)
	if err := publishOne(t, p, m); err != nil {
		t.Fatal(err)
	}

	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	m = adaptertest.Msg(prefix+".Order.Created", "k", 1)
	for range 2 { // twice: the verdict is not a one-off
		adaptertest.IsOutage(t, "publish with the stream deleted", publishOne(t, p, m), `no JetStream stream captures subject "`+prefix+`.Order.Created"`)
	}

	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := publishOne(t, p, m); err != nil {
		t.Fatalf("publish after the stream was made again: %v", err)
	}
}

// TestStreamFullIsOutage: a stream at its limit with discard new refuses
// ("maximum messages exceeded"): an outage, since the stream takes the same
// event once a consumer or an operator makes room.
func TestStreamFullIsOutage(t *testing.T) {
	url, prefix, p := sharedPublisher(t, jetstream.StreamConfig{Storage: jetstream.MemoryStorage, MaxMsgs: 2, Discard: jetstream.DiscardNew}, natsbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs := []broker.Message{adaptertest.Msg(prefix+".a", "k", 0), adaptertest.Msg(prefix+".a", "k", 1), adaptertest.Msg(prefix+".a", "k", 2)}
	errs := p.Publish(ctx, msgs)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the first two: %v, %v", errs[0], errs[1])
	}
	adaptertest.IsOutage(t, "publish to a full stream", errs[2], "full")

	js, jctx := jetStreamAt(t, url, 10*time.Second)
	if err := streamOf(jctx, t, js, streamName(prefix)).Purge(jctx); err != nil {
		t.Fatal(err)
	}
	if err := publishOne(t, p, msgs[2]); err != nil {
		t.Fatalf("publish after the purge: %v", err)
	}
}

// TestSealedStreamIsOutage: a sealed stream takes nothing more. The event
// is not at fault: it waits, as an outage, for a stream that takes it.
func TestSealedStreamIsOutage(t *testing.T) {
	url, prefix, p := sharedPublisher(t, inMemory, natsbroker.Options{})
	js, ctx := jetStreamAt(t, url, 10*time.Second)
	cfg := streamOf(ctx, t, js, streamName(prefix)).CachedInfo().Config
	cfg.Sealed = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	adaptertest.IsOutage(t, "publish to a sealed stream", publishOne(t, p, adaptertest.Msg(prefix+".a", "k", 0)), "sealed")
}

// TestBatchStreamFullIsOutage: on a server with batch publish, a run of one
// key that fills the stream ends in an outage, not in failures that spend
// attempts: the batch is cut short, the rest goes one at a time, and the
// first refused message says the stream is full.
func TestBatchStreamFullIsOutage(t *testing.T) {
	batchModes(t, func(t *testing.T, url, stream, prefix, mode string) {
		js, ctx := jetStreamAt(t, url, 20*time.Second)
		cfg := streamOf(ctx, t, js, stream).CachedInfo().Config
		cfg.MaxMsgs, cfg.Discard = 5, jetstream.DiscardNew
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: stream})
		if got := p.BatchMode(); got != mode {
			t.Fatalf("batch mode %q, want %q", got, mode)
		}
		var msgs []broker.Message
		for i := range 10 {
			msgs = append(msgs, adaptertest.Msg(prefix+".Order.Created", "hot", i))
		}
		pctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		errs := p.Publish(pctx, msgs)
		first := -1
		for i, err := range errs {
			if err != nil {
				first = i
				break
			}
		}
		if first < 0 {
			t.Fatal("every message confirmed by a stream of at most 5")
		}
		adaptertest.IsOutage(t, "first refused message of the run", errs[first], "full")
		for i, err := range errs[first:] {
			if !errors.Is(err, txbox.ErrBrokerUnavailable) {
				t.Errorf("message %d after the refused one: %v, want an outage", first+i, err)
			}
		}
	})
}

// TestSubscriberRemakesItsDurableConsumer: the stream is deleted under a
// subscriber (and its durable consumer with it) and made again. While it
// is missing Receive fails as an outage; once it is back the subscriber
// makes its durable consumer again and receives what is published there,
// without being opened again.
func TestSubscriberRemakesItsDurableConsumer(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_NATS")
	prefix, cfg, js, ctx := ownStream(t, url, "txboxtest.sub", jetstream.MemoryStorage, 60*time.Second)
	p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: cfg.Name})
	sub, err := natsbroker.OpenSubscriber(ctx, url, natsbroker.SubscriberOptions{Stream: cfg.Name, Durable: "remade"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	// Short, as the inbox's receives are: a consumer that is gone must be
	// found though no single pull lasts long.
	receive := func(what string) ([]broker.Delivery, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ds, err := sub.Receive(rctx, 10)
		t.Logf("%s: %d deliveries, err %v", what, len(ds), err)
		return ds, err
	}
	if err := publishOne(t, p, adaptertest.Msg(prefix+".Order.Created", "k", 0)); err != nil {
		t.Fatal(err)
	}
	ds, err := receive("before")
	if err != nil || len(ds) != 1 {
		t.Fatalf("before the deletion: %d deliveries, %v", len(ds), err)
	}
	_ = ds[0].Ack(ctx)

	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	outages := 0
	for deadline := time.Now().Add(20 * time.Second); outages < 2; {
		_, err := receive("stream deleted")
		switch {
		case errors.Is(err, txbox.ErrBrokerUnavailable):
			outages++
		case time.Now().After(deadline):
			t.Fatalf("receive with the stream deleted: err = %v, want an outage", err)
		}
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	m := adaptertest.Msg(prefix+".Order.Created", "k", 1)
	if err := publishOne(t, p, m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ds, err := receive("stream made again")
		if err == nil && len(ds) == 1 {
			ev, err := ds[0].Event()
			if err != nil || ev.ID != m.Event.ID {
				t.Fatalf("received %v, %v; want %s", ev.ID, err, m.Event.ID)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber never received from the stream made again: %d deliveries, %v", len(ds), err)
		}
	}
}

// TestStaleDeliverySettlesNothing: JetStream finds an ack's message by its
// stream sequence alone. A delivery taken before the stream was deleted and
// made again, settled after another process made the durable consumer again,
// would settle the new stream's message with the same sequence, which would
// then never come (the fault harness lost events this way: an Ordered inbox
// holds deliveries for a while). Its ack is refused and its nak sends
// nothing; a delivery of the current consumer, held as long, settles as
// usual.
func TestStaleDeliverySettlesNothing(t *testing.T) {
	url := testenv.URL(t, "TXBOX_TEST_NATS")
	prefix, cfg, js, ctx := ownStream(t, url, "txboxtest.stale", jetstream.MemoryStorage, 60*time.Second)
	p := adaptertest.Open(t, natsbroker.Open, url, natsbroker.Options{Stream: cfg.Name})
	subscriber := func() *natsbroker.Subscriber {
		s, err := natsbroker.OpenSubscriber(ctx, url, natsbroker.SubscriberOptions{Stream: cfg.Name, Durable: "held", AckWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	receiveOne := func(s *natsbroker.Subscriber, id string) broker.Delivery {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ds, err := s.Receive(rctx, 10)
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive: %d deliveries, %v", len(ds), err)
		}
		if ev, err := ds[0].Event(); err != nil || ev.ID != id {
			t.Fatalf("received %v, %v; want %s", ev.ID, err, id)
		}
		return ds[0]
	}
	ackPending := func() int { return consumerInfo(ctx, t, js, cfg.Name, "held").NumAckPending }

	old := adaptertest.Msg(prefix+".Order.Created", "k", 1)
	if err := publishOne(t, p, old); err != nil {
		t.Fatal(err)
	}
	a := subscriber()
	held := receiveOne(a, old.Event.ID) // stream sequence 1, held unacknowledged

	// The stream is deleted and made again; another process makes the
	// durable consumer again and takes the new stream's first message, also
	// at stream sequence 1. Made again at once, with delivered sequences no
	// lower than the first one's, a consumer is told apart only by its
	// creation time, which is compared to the second (a server restart moves
	// the one it reports by a fraction of one): so not at once.
	time.Sleep(1500 * time.Millisecond)
	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	current := adaptertest.Msg(prefix+".Order.Created", "k", 2)
	if err := publishOne(t, p, current); err != nil {
		t.Fatal(err)
	}
	b := subscriber()
	fresh := receiveOne(b, current.Event.ID)
	if n := ackPending(); n != 1 {
		t.Fatalf("ack pending %d before the stale settles, want 1", n)
	}

	time.Sleep(1500 * time.Millisecond) // both held past a quick settle
	if err := held.(broker.AsyncAcker).AckAsync(); err == nil {
		t.Error("async ack of the stale delivery was sent")
	}
	if err := held.Ack(ctx); err == nil {
		t.Error("ack of the stale delivery was sent")
	}
	if err := held.Nak(ctx, 0); err != nil {
		t.Errorf("nak of the stale delivery: %v, want nil (nothing to send back)", err)
	}
	time.Sleep(300 * time.Millisecond) // an ack sent would have landed by now
	if n := ackPending(); n != 1 {
		t.Fatalf("ack pending %d after the stale delivery was settled: it settled the new stream's message in its place", n)
	}
	if err := fresh.Ack(ctx); err != nil {
		t.Fatalf("ack of the current delivery, held as long: %v", err)
	}
	if n := ackPending(); n != 0 {
		t.Fatalf("ack pending %d after the current delivery was acknowledged, want 0", n)
	}
}

// TestHeldDeliveryAckedAcrossBrokerRestart: a server restart is not the
// durable consumer made again (the creation time it reports moves by a
// fraction of a second): a delivery held across one still settles its own
// message.
func TestHeldDeliveryAckedAcrossBrokerRestart(t *testing.T) {
	srv, cfg, ctx, sub := restartable(t, "txboxtest.restart", 2, time.Minute)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ds, err := sub.Receive(rctx, 1)
	cancel()
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %d deliveries, %v", len(ds), err)
	}
	held := ds[0]

	srv.Kill()
	srv.Start()
	waitJetStream(t, srv.URL)
	time.Sleep(1500 * time.Millisecond) // held past a quick settle
	// A receive after the restart asks whether the consumer is gone. A
	// server killed mid-run may not have stored its last delivery, so the
	// held message can come again too: whatever comes is acknowledged.
	for deadline := time.Now().Add(20 * time.Second); ; {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ds, err := sub.Receive(rctx, 1)
		cancel()
		if err == nil && len(ds) == 1 {
			if err := ds[0].Ack(ctx); err != nil {
				t.Fatalf("ack of the delivery taken after the restart: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivery after the restart: %v", err)
		}
	}
	if err := held.Ack(ctx); err != nil {
		t.Fatalf("ack of the delivery held across the restart: %v (taken for one of a consumer made again?)", err)
	}
	// Whatever is left (the second message, if the first came again) is
	// taken and acknowledged, so that both end settled.
	for i := 0; i < 3; i++ {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		ds, err := sub.Receive(rctx, 10)
		cancel()
		if err != nil {
			break
		}
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack after the restart: %v", err)
			}
		}
	}
	js2, ctx2 := jetStreamAt(t, srv.URL, 10*time.Second)
	if info := consumerInfo(ctx2, t, js2, cfg.Name, "held"); info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("after both acks: %d ack pending, %d pending; want 0 and 0", info.NumAckPending, info.NumPending)
	}
}

// TestManyHeldDeliveriesAckedAcrossBrokerRestart: a server killed before
// its store caught up comes back with the durable consumer rolled back
// (delivered 200 became 100 and the ack floor 20 became 0 when this was
// first seen). That is still the consumer the deliveries came from, on the
// same stream: each delivery held across the restart settles its own
// message, none is refused as if the consumer had been made again, and
// what the server redelivers is settled too, until nothing is pending.
func TestManyHeldDeliveriesAckedAcrossBrokerRestart(t *testing.T) {
	// An ack wait of seconds: the restart may lose acknowledgements too (the
	// ack floor went back to 0), and those messages come again only then.
	srv, cfg, ctx, sub := restartable(t, "txboxtest.rollback", 300, 5*time.Second)
	var held []broker.Delivery
	for len(held) < 200 {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ds, err := sub.Receive(rctx, 200-len(held))
		cancel()
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		held = append(held, ds...)
	}
	for _, d := range held[:20] {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	srv.Kill()
	srv.Start()
	waitJetStream(t, srv.URL)
	time.Sleep(1500 * time.Millisecond) // held past a quick settle: each ack asks whether the consumer was made again
	stale := 0
	for _, d := range held[20:] {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.Ack(actx)
		cancel()
		if err != nil && strings.Contains(err.Error(), "made again") {
			stale++
		}
	}
	if stale > 0 {
		t.Fatalf("%d of %d acks held across the restart were refused as if the consumer had been made again", stale, len(held)-20)
	}
	// What the rolled-back consumer delivers again is taken and settled.
	js2, _ := jetStreamAt(t, srv.URL, 10*time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info := consumerInfo(ictx, t, js2, cfg.Name, "held")
		cancel()
		if info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %d ack pending, %d pending; want 0 and 0", info.NumAckPending, info.NumPending)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		ds, _ := sub.Receive(rctx, 100)
		cancel()
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack after the restart: %v", err)
			}
		}
	}
}

// restartable is the setup of the broker-restart tests: a nats-server of
// the test's own (to kill and start again), a file-stored stream holding n
// messages of n aggregates, and a subscriber on its durable "held" with
// ackWait; both clients reconnect within 100 ms.
func restartable(t *testing.T, name string, n int, ackWait time.Duration) (*testenv.NATSServer, jetstream.StreamConfig, context.Context, *natsbroker.Subscriber) {
	t.Helper()
	if _, err := testenv.NATSBinary(); err != nil && !testenv.Required() {
		t.Skipf("own nats-server unavailable: %v", err)
	}
	srv := testenv.StartNATS(t)
	waitJetStream(t, srv.URL)
	prefix, cfg, _, ctx := ownStream(t, srv.URL, name, jetstream.FileStorage, 60*time.Second)
	conn := natsbroker.Connection{ReconnectWait: 100 * time.Millisecond}
	p := adaptertest.Open(t, natsbroker.Open, srv.URL, natsbroker.Options{Stream: cfg.Name, Connection: conn})
	for i := range n {
		if err := publishOne(t, p, adaptertest.Msg(prefix+".Order.Created", fmt.Sprintf("k%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := natsbroker.OpenSubscriber(ctx, srv.URL, natsbroker.SubscriberOptions{Stream: cfg.Name, Durable: "held", AckWait: ackWait, Connection: conn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return srv, cfg, ctx, sub
}
