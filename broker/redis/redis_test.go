package redisbroker_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/brokertest"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	redisbroker "github.com/txbox/txbox/broker/redis"
	"github.com/txbox/txbox/internal/testenv"
)

// admin is a plain client for the test's own setup and inspection.
func admin(t *testing.T, rawURL string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// shared returns the shared server's URL and a prefix for this test's keys,
// deleted when the test ends.
func shared(t *testing.T) (string, *redis.Client, string) {
	t.Helper()
	rawURL := testenv.URL(t, "TXBOX_TEST_REDIS")
	c := admin(t, rawURL)
	prefix := adaptertest.Unique("txboxtest:") + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return rawURL, c, prefix
}

// TestConformance runs brokertest against a redis-server of this test's
// own with an append-only file (appendfsync always), so that the
// broker-down case kills and restarts it and checks that what it
// acknowledged survived. Without the binary it falls back to the shared
// server (which keeps nothing on disk) and that case is skipped; under
// TXBOX_REQUIRE_SERVICES=1 the missing binary fails the test.
func TestConformance(t *testing.T) {
	srv := adaptertest.OwnOrShared(t, "redis-server", testenv.RedisBinary, "TXBOX_TEST_REDIS", func(t *testing.T) adaptertest.Server {
		srv := testenv.StartRedis(t)
		return adaptertest.Server{URL: srv.URL, Stop: func(*testing.T) { srv.Kill() }, Start: func(*testing.T) { srv.Start() }}
	})
	rawURL := srv.URL
	adm := admin(t, rawURL)
	run := adaptertest.Unique("bt:")
	var n atomic.Int64
	const ackWait = time.Second
	brokertest.Run(t, brokertest.Harness{
		// A stream keeps append order; persistent only with an append-only
		// file; Redis does not drop a repeated event id; pending entries
		// are claimed again.
		Capabilities: func(p broker.Publisher) brokertest.Capabilities {
			rp := p.(*redisbroker.Publisher)
			return brokertest.Capabilities{OrderPerKey: true, Persistent: rp.Persistent(), Redelivery: true, MaxPayload: rp.MaxPayload()}
		},
		NewPublisher: adaptertest.NewPublisher(redisbroker.Open, rawURL, redisbroker.Options{MaxPayload: 1 << 20, Connection: redisbroker.Connection{Logger: adaptertest.Quiet}}),
		NewSubscriber: adaptertest.NewSubscriber(redisbroker.OpenSubscriber, rawURL, func(group, topic string) redisbroker.SubscriberOptions {
			return redisbroker.SubscriberOptions{Streams: []string{topic}, Group: group, AckWait: ackWait}
		}),
		Topic:         func(*testing.T) string { return fmt.Sprintf("%s:t%d:Order.Created", run, n.Add(1)) },
		InvalidTopics: []string{""},
		// XADD makes a missing stream, so a stream is never missing; the
		// nearest is a key of another type in its place (WRONGTYPE), which
		// must go before the stream can be made.
		MissingDestination: func(t *testing.T) (string, func(*testing.T)) {
			key := fmt.Sprintf("%s:m%d:Order.Created", run, n.Add(1))
			if err := adm.Set(context.Background(), key, "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			return key, func(t *testing.T) {
				if err := adm.Del(context.Background(), key).Err(); err != nil {
					t.Fatal(err)
				}
			}
		},
		// The stream key, with its entries and consumer groups.
		RecreateDestination: func(t *testing.T, topic string) {
			if err := adm.Del(context.Background(), topic).Err(); err != nil {
				t.Fatal(err)
			}
		},
		AckWait:     ackWait,
		StopBroker:  srv.Stop,
		StartBroker: srv.Start,
		PublishRaw: func(ctx context.Context, t *testing.T, topic string, headers map[string]string, body []byte) {
			var fields []any
			for k, v := range headers {
				fields = append(fields, k, v)
			}
			fields = append(fields, redisbroker.FieldData, body)
			if err := adm.XAdd(ctx, &redis.XAddArgs{Stream: topic, Values: fields}).Err(); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestRedisCLI: a message published by txbox is decoded by the stock
// command-line client: redis-cli XRANGE shows every field by its name.
func TestRedisCLI(t *testing.T) {
	rawURL, _, prefix := shared(t)
	cli := testenv.Tool(t, "redis-cli")
	p := adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{})
	stream := prefix + "Order"
	m := adaptertest.Full(stream, "o-1", 7)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adaptertest.PublishOK(ctx, t, p, []broker.Message{m})
	out, err := exec.CommandContext(ctx, cli, "-u", rawURL, "--raw", "XRANGE", stream, "-", "+").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli XRANGE: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	// id, then field and value lines, in the order written.
	if len(lines) < 3 || len(lines)%2 != 1 {
		t.Fatalf("redis-cli XRANGE printed:\n%s", out)
	}
	var names []string
	got := map[string]string{}
	for i := 1; i+1 < len(lines); i += 2 {
		names = append(names, lines[i])
		got[lines[i]] = lines[i+1]
	}
	want := []string{"ce_specversion", "ce_id", "ce_type", "ce_source", "ce_subject", "ce_time", "ce_datacontenttype", "ce_aggregatetype", "ce_aggregateversion", "ce_traceparent", "data"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("fields %v, want %v", names, want)
	}
	for k, v := range map[string]string{
		"ce_specversion": "1.0", "ce_id": m.Event.ID, "ce_type": "Created", "ce_source": "test", "ce_subject": "o-1",
		"ce_time": m.Event.OccurredAt.UTC().Format(time.RFC3339Nano), "ce_datacontenttype": "application/json",
		"ce_aggregatetype": "Order", "ce_aggregateversion": "3", "ce_traceparent": m.Event.Headers["traceparent"],
		"data": string(m.Event.Payload),
	} {
		if got[k] != v {
			t.Errorf("redis-cli shows %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestNakDelays: a Nak'd entry comes back no sooner than its delay, also
// past the ack wait (held by the delayed set), with a delivery count that
// grows by one per claim.
func TestNakDelays(t *testing.T) {
	rawURL, adm, prefix := shared(t)
	stream := prefix + "s"
	p := adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{})
	const ackWait = 300 * time.Millisecond
	s := adaptertest.Open(t, redisbroker.OpenSubscriber, rawURL, redisbroker.SubscriberOptions{Streams: []string{stream}, Group: "g", AckWait: ackWait})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	m := adaptertest.Msg(stream, "k", 0)
	adaptertest.PublishOK(ctx, t, p, []broker.Message{m})
	adaptertest.NakLadder(ctx, t, s, m, 100*time.Millisecond, 900*time.Millisecond, 0, -1)
	if n, err := adm.Exists(ctx, redisbroker.DelayedKey(stream, "g")).Result(); err != nil || n != 0 {
		t.Errorf("delayed set left behind: %d, %v", n, err)
	}
}

// TestDeadConsumerClaimed: an entry a consumer took and never acked is
// claimed by another consumer of the group after the ack wait.
func TestDeadConsumerClaimed(t *testing.T) {
	rawURL, _, prefix := shared(t)
	stream := prefix + "s"
	p := adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, err := range p.Publish(ctx, []broker.Message{adaptertest.Msg(stream, "k", 0), adaptertest.Msg(stream, "k", 1)}) {
		if err != nil {
			t.Fatal(i, err)
		}
	}
	opts := redisbroker.SubscriberOptions{Streams: []string{stream}, Group: "g", AckWait: 300 * time.Millisecond}
	a := adaptertest.Open(t, redisbroker.OpenSubscriber, rawURL, opts)
	ds, err := a.Receive(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatal(len(ds), err)
	}
	first, _ := ds[0].Event()
	a.Close() // dies with the entry pending

	b := adaptertest.Open(t, redisbroker.OpenSubscriber, rawURL, opts)
	var got []string
	for len(got) < 2 {
		ds, err := b.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			e, _ := d.Event()
			if e.ID == first.ID && d.Attempt() != 2 {
				t.Errorf("claimed entry: Attempt() = %d, want 2", d.Attempt())
			}
			got = append(got, e.ID)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got[0] != first.ID && got[1] != first.ID {
		t.Errorf("the dead consumer's entry was not claimed: %v", got)
	}
}

// TestMultiStreamMax: a read over several streams never returns more than
// max, and keeps the rest for the next Receive.
func TestMultiStreamMax(t *testing.T) {
	rawURL, _, prefix := shared(t)
	streams := []string{prefix + "a", prefix + "b", prefix + "c"}
	p := adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{MaxLen: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := adaptertest.Open(t, redisbroker.OpenSubscriber, rawURL, redisbroker.SubscriberOptions{Streams: streams, Group: "g", StartID: "$"})
	var msgs []broker.Message
	for i := range 9 {
		msgs = append(msgs, adaptertest.Msg(streams[i%3], "k", i))
	}
	for i, err := range p.Publish(ctx, msgs) {
		if err != nil {
			t.Fatal(i, err)
		}
	}
	seen := map[string]bool{}
	for len(seen) < 9 {
		ds, err := s.Receive(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 2 {
			t.Fatalf("Receive(2) returned %d", len(ds))
		}
		for _, d := range ds {
			e, err := d.Event()
			if err != nil || seen[e.ID] {
				t.Fatalf("%v %v", e.ID, err)
			}
			seen[e.ID] = true
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	rawURL, adm, prefix := shared(t)
	str := prefix + "string"
	adm.Set(context.Background(), str, "x", 0)
	adaptertest.ConfigRefused(t, "", map[string]func(context.Context) error{
		"bad URL":                adaptertest.Opening(redisbroker.Open, "redis://127.0.0.1:notaport", redisbroker.Options{}),
		"no streams":             adaptertest.Opening(redisbroker.OpenSubscriber, rawURL, redisbroker.SubscriberOptions{Group: "g"}),
		"no group":               adaptertest.Opening(redisbroker.OpenSubscriber, rawURL, redisbroker.SubscriberOptions{Streams: []string{"x"}}),
		"a string key as stream": adaptertest.Opening(redisbroker.OpenSubscriber, rawURL, redisbroker.SubscriberOptions{Streams: []string{str}, Group: "g"}),
	})
	adaptertest.WrongPasswordAndNoServer(t, rawURL, "nosuchuser", func(url string, d time.Duration) func(context.Context) error {
		return adaptertest.Opening(redisbroker.Open, url, redisbroker.Options{Connection: redisbroker.Connection{ConnectTimeout: d}})
	})
}

// TestClientOptions: the caller's go-redis settings apply after txbox's,
// on both sides (a database the server does not have is refused as
// configuration), and cannot turn the library's own retries back on.
func TestClientOptions(t *testing.T) {
	rawURL, _, prefix := shared(t)
	noDB := func(o *redis.Options) {
		if o.ClientName != "txbox-publisher" && o.ClientName != "txbox-subscriber" {
			t.Errorf("ClientOptions saw client name %q, want txbox's", o.ClientName)
		}
		o.DB = 1 << 20
	}
	adaptertest.ConfigRefused(t, "DB index", map[string]func(context.Context) error{
		"publisher":  adaptertest.Opening(redisbroker.Open, rawURL, redisbroker.Options{Connection: redisbroker.Connection{ClientOptions: noDB}}),
		"subscriber": adaptertest.Opening(redisbroker.OpenSubscriber, rawURL, redisbroker.SubscriberOptions{Streams: []string{prefix + "s"}, Group: "g", Connection: redisbroker.Connection{ClientOptions: noDB}}),
	})
	retries := func(o *redis.Options) { o.MaxRetries = 5 }
	p := adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{Connection: redisbroker.Connection{ClientOptions: retries}})
	if n := p.Client().Options().MaxRetries; n > 0 {
		t.Errorf("MaxRetries = %d after ClientOptions set 5, want txbox's none", n)
	}
}

// TestPersistenceReported: the shared server keeps nothing on disk, and
// the publisher says so.
func TestPersistenceReported(t *testing.T) {
	rawURL, adm, _ := shared(t)
	aof, err := adm.ConfigGet(context.Background(), "appendonly").Result()
	if err != nil {
		t.Fatalf("CONFIG GET appendonly: %v", err)
	}
	p := adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{})
	if got, want := p.Persistent(), aof["appendonly"] == "yes"; got != want {
		t.Errorf("Persistent = %v with appendonly %q", got, aof["appendonly"])
	}
	if p.MaxPayload() <= 0 {
		t.Errorf("MaxPayload = %d", p.MaxPayload())
	}
	if !adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{AssumePersistent: true}).Persistent() {
		t.Error("AssumePersistent ignored")
	}
}

// TestStreamDeletedWhileSubscribed: a stream deleted under a subscriber
// fails one Receive as unavailable, and the group is made again for what
// is published next.
func TestStreamDeletedWhileSubscribed(t *testing.T) {
	rawURL, adm, prefix := shared(t)
	stream := prefix + "s"
	p := adaptertest.Open(t, redisbroker.Open, rawURL, redisbroker.Options{})
	s := adaptertest.Open(t, redisbroker.OpenSubscriber, rawURL, redisbroker.SubscriberOptions{Streams: []string{stream}, Group: "g"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := adm.Del(ctx, stream).Err(); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := s.Receive(rctx, 1)
	rcancel()
	if !errors.Is(err, txbox.ErrBrokerUnavailable) {
		t.Fatalf("Receive on a deleted stream: %v, want ErrBrokerUnavailable", err)
	}
	m := adaptertest.Msg(stream, "k", 0)
	adaptertest.PublishOK(ctx, t, p, []broker.Message{m})
	if _, e := adaptertest.One(ctx, t, s); e.ID != m.Event.ID {
		t.Fatalf("got %s, want %s", e.ID, m.Event.ID)
	}
}
