package kafkabroker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/broker/kafka/kafkatest"
)

// receiveN collects n deliveries within d.
func receiveN(t *testing.T, s broker.Subscriber, n int, d time.Duration) []broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return adaptertest.Receive(ctx, t, s, n, nil)
}

func payloads(t *testing.T, ds []broker.Delivery) []string {
	t.Helper()
	var out []string
	for _, d := range ds {
		e, err := d.Event()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(e.Payload))
	}
	return out
}

func publishAll(t *testing.T, p broker.Publisher, msgs ...broker.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adaptertest.PublishOK(ctx, t, p, msgs)
}

// TestAckCommitsWatermark: acknowledging later records of a partition while
// an earlier one is out commits nothing past the earlier one; once it is
// acknowledged, the group resumes after all of them.
func TestAckCommitsWatermark(t *testing.T) {
	kc, p := withTopic(t, "wm", 1)
	publishAll(t, p, adaptertest.Msg("wm", "a", 0), adaptertest.Msg("wm", "b", 1), adaptertest.Msg("wm", "c", 2))
	ctx := context.Background()

	s := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"wm"}})
	ds := receiveN(t, s, 3, 10*time.Second)
	if err := ds[1].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[2].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// #0 was never acknowledged: the group starts at it again, and the
	// acknowledged later ones come with it (the inbox drops them).
	s = adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"wm"}})
	ds = receiveN(t, s, 3, 10*time.Second)
	if got := payloads(t, ds); got[0] != `{"n":0}` {
		t.Fatalf("after reopening: %v, want #0 first", got)
	}
	if a := ds[0].Attempt(); a != 1 {
		t.Errorf("Attempt() after reopening = %d, want 1 (counted per subscriber)", a)
	}
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Errorf("second Ack = %v, want a no-op", err)
		}
	}
	s.Close()

	s = adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"wm"}})
	publishAll(t, p, adaptertest.Msg("wm", "d", 3))
	if got := payloads(t, receiveN(t, s, 1, 10*time.Second)); got[0] != `{"n":3}` {
		t.Fatalf("after acking everything: %v, want only the new #3", got)
	}
}

// TestNakRedeliversFromMemoryAndFromKafka: a Nak'd record comes back after
// its delay while later records flow; if the subscriber goes away first,
// Kafka delivers it again from the uncommitted offset.
func TestNakRedeliversFromMemoryAndFromKafka(t *testing.T) {
	kc, p := withTopic(t, "nak", 1)
	publishAll(t, p, adaptertest.Msg("nak", "a", 0), adaptertest.Msg("nak", "b", 1))
	ctx := context.Background()
	s := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"nak"}, AckWait: -1})
	ds := receiveN(t, s, 2, 10*time.Second)
	// The delay runs from the Nak: measured from after the Ack, which
	// waits for a commit, it looked short on a loaded machine.
	start := time.Now()
	if err := ds[0].Nak(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	again := receiveN(t, s, 1, 5*time.Second)
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Errorf("redelivered after %v, before the 300ms delay", el)
	}
	if got := payloads(t, again); got[0] != `{"n":0}` || again[0].Attempt() != 2 {
		t.Fatalf("redelivery %v attempt %d, want #0 attempt 2", got, again[0].Attempt())
	}
	// Nak again, then go away before the delay: Kafka has it.
	if err := again[0].Nak(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"nak"}})
	ds = receiveN(t, s, 2, 10*time.Second)
	if got := payloads(t, ds); got[0] != `{"n":0}` || got[1] != `{"n":1}` {
		t.Fatalf("after reopening: %v, want #0 and the acknowledged #1 again", got)
	}
}

// TestReceiveWaitsForFirstMessage: a waiting Receive returns as soon as one
// record exists, without waiting to fill its batch.
func TestReceiveWaitsForFirstMessage(t *testing.T) {
	kc, p := withTopic(t, "wait", 2)
	s := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"wait"}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	raw := adaptertest.FirstDelivery(ctx, t, p, s, adaptertest.Msg("wait", "k", 0), 500*time.Millisecond).Raw() // ID is topic/partition/offset
	if !strings.HasPrefix(raw.ID, "wait/") || !strings.HasSuffix(raw.ID, "/0") || raw.Headers["ce_type"] != "Created" || raw.Headers["content-type"] != "application/json" {
		t.Errorf("Raw() = %+v", raw)
	}
}

// TestTwoMembersShareTheWork: two subscribers of one group split the
// partitions; every record is delivered, and acknowledged records do not
// come back when one member leaves.
func TestTwoMembersShareTheWork(t *testing.T) {
	kc, p := withTopic(t, "share", 4)
	a := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"share"}})
	b := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"share"}})
	var msgs []broker.Message
	for i := range 40 {
		msgs = append(msgs, adaptertest.Msg("share", string(rune('a'+i%8)), i))
	}
	publishAll(t, p, msgs...)
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(seen) < 40 {
		for _, s := range []*kafkabroker.Subscriber{a, b} {
			rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			ds, err := s.Receive(rctx, 40)
			rcancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			for _, d := range ds {
				e, err := d.Event()
				if err != nil {
					t.Fatal(err)
				}
				seen[e.ID]++
				if err := d.Ack(ctx); err != nil {
					t.Logf("ack: %v", err) // a rebalance may take the partition away
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("received %d of 40", len(seen))
		}
	}
	a.Close()
	adaptertest.Silent(t, b, time.Second, "the acknowledged records must not come back")
}

// TestUndecodable: a record that is not a txbox CloudEvent fails to decode
// permanently and keeps its position as Raw().ID.
func TestUndecodable(t *testing.T) {
	kc := kafkatest.Start(t)
	if err := kc.CreateTopic("raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl := kc.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rawRecord("raw", map[string]string{"ce_specversion": "1.0", "ce_id": "x", "ce_type": "T", "ce_time": "noon"}, `{}`)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rawRecord("raw", map[string]string{"ce_specversion": "1.0", "ce_id": "x", "CE_ID": "y", "ce_type": "T"}, `{}`)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"raw"}})
	for i, d := range receiveN(t, s, 2, 10*time.Second) {
		if _, err := d.Event(); !errors.Is(err, txbox.ErrPermanent) {
			t.Errorf("record %d: Event() = %v, want a permanent error", i, err)
		}
		if id := d.Raw().ID; id != "raw/0/"+string(rune('0'+i)) {
			t.Errorf("record %d: Raw().ID = %q", i, id)
		}
	}
}

func rawRecord(topic string, headers map[string]string, body string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: []byte(body)}
	for k, v := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return r
}

// TestAckAsyncCommitsInTheBackgroundAndAtClose: AckAsync returns without a
// commit, the committer commits in the background, and Close commits what
// is left: a member that joins after holds none of the acknowledged
// records, and the watermark rule holds (a record acknowledged behind an
// older one still out is not committed past it).
func TestAckAsyncCommitsInTheBackgroundAndAtClose(t *testing.T) {
	kc, p := withTopic(t, "async", 1)
	publishAll(t, p, adaptertest.Msg("async", "a", 0), adaptertest.Msg("async", "a", 1), adaptertest.Msg("async", "a", 2))
	opts := kafkabroker.SubscriberOptions{Group: "svc", Topics: []string{"async"}, AckWait: -1}
	s := adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), opts)
	ds := receiveN(t, s, 3, 10*time.Second)
	for _, i := range []int{0, 2} { // #1 stays out
		if err := ds[i].(broker.AsyncAcker).AckAsync(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), opts)
	ds = receiveN(t, s, 2, 10*time.Second)
	if got := payloads(t, ds); got[0] != `{"n":1}` || got[1] != `{"n":2}` {
		t.Fatalf("after AckAsync of #0 and #2 and a Close: %v, want #1 and #2 (the watermark stops at #1)", got)
	}
	for _, d := range ds {
		if err := d.(broker.AsyncAcker).AckAsync(); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = adaptertest.Open(t, kafkabroker.OpenSubscriber, kc.URL(), opts)
	publishAll(t, p, adaptertest.Msg("async", "a", 3))
	if got := payloads(t, receiveN(t, s, 1, 10*time.Second)); got[0] != `{"n":3}` {
		t.Fatalf("after AckAsync of everything and a Close: %v, want only the new #3", got)
	}
}
