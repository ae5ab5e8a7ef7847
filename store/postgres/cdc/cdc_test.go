package cdc_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store/postgres/cdc"
	"github.com/txbox/txbox/telemetry/prom"
)

// Rows and tableless events, written in interleaved transactions across
// aggregates, reach the broker in commit order, once each; delivered rows
// leave the outbox table for the archive.
func TestCommitOrderRowsAndMessages(t *testing.T) {
	e := newEnv(t)
	b := membroker.New(membroker.Options{})
	r := e.start(e.slot(), b, nil)
	var want []string
	aggs := []string{"a", "b", "c"}
	counts := map[string]int{}
	for i := range 60 {
		agg := aggs[(i*7)%3]
		x := ev(agg, counts[agg])
		counts[agg]++
		// Every third transaction is tableless; some carry two events.
		e.write(i%3 == 0, x)
		want = append(want, x.ID)
		if i%5 == 0 {
			y := ev(agg, counts[agg])
			counts[agg]++
			e.write(i%3 == 0, y)
			want = append(want, y.ID)
		}
	}
	got, dups := waitFirsts(t, b.Messages, 20*time.Second, "every event", len(want))
	for i := range want {
		if got[i].Event.ID != want[i] {
			t.Fatalf("message %d is %s, want %s (commit order)", i, got[i].Event.ID, want[i])
		}
	}
	if dups != 0 {
		t.Errorf("%d duplicates without any failure", dups)
	}
	checkOrder(t, got, counts)
	if err := r.r.Alive(); err != nil {
		t.Errorf("Alive: %v", err)
	}
	if err := r.r.Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
	testenv.WaitFor(t, time.Minute, "rows archived", func() bool {
		return e.countRows("PENDING") == 0
	})
	rows := 0
	for i := range 60 {
		if i%3 != 0 {
			rows++
			if i%5 == 0 {
				rows++
			}
		}
	}
	if n := e.countSent(); n != rows {
		t.Errorf("archive holds %d rows, want %d (tableless events leave none)", n, rows)
	}
	// The wire form is the polling relay's: topic from the template,
	// CloudEvents source.
	if m := got[0]; m.Topic != "order.order.step" && !strings.Contains(m.Topic, "order") {
		t.Errorf("topic %q", m.Topic)
	}
	r.stop(t)
}

// A relay stopped and started again resumes from the slot: nothing written
// while it was down is lost, and rows written before the slot existed are
// delivered too.
func TestRestartResumes(t *testing.T) {
	e := newEnv(t)
	b := membroker.New(membroker.Options{})
	slot := e.slot()
	before := ev("x", 0)
	e.write(false, before) // before the slot exists
	r := e.start(slot, b, nil)
	e.write(false, ev("x", 1))
	e.write(true, ev("x", 2))
	waitFirsts(t, b.Messages, 20*time.Second, "3 events", 3)
	r.stop(t)
	for i := 3; i < 10; i++ {
		e.write(i%2 == 0, ev("x", i))
	}
	r = e.start(slot, b, nil)
	got, _ := waitFirsts(t, b.Messages, 20*time.Second, "10 events", 10)
	checkOrder(t, got, map[string]int{"x": 10})
	r.stop(t)
}

// An event the broker refuses for good (too big) is dead with its reason,
// a row as a DEAD row and a tableless event stored as one, and the stream
// goes on with the events after it.
func TestPermanentFailureGoesDead(t *testing.T) {
	e := newEnv(t)
	b := membroker.New(membroker.Options{MaxPayload: 200})
	r := e.start(e.slot(), b, nil)
	big := func(agg string, n int) txbox.Event {
		x := ev(agg, n)
		x.Payload = []byte(`{"agg":"` + agg + `","pad":"` + strings.Repeat("z", 500) + `"}`)
		return x
	}
	e.write(false, ev("p", 0))
	e.write(false, big("p", -1))
	e.write(true, big("q", -1))
	e.write(false, ev("p", 1))
	e.write(true, ev("q", 0))
	waitFirsts(t, b.Messages, 20*time.Second, "3 deliverable events", 3)
	testenv.WaitFor(t, time.Minute, "2 DEAD rows", func() bool { return e.countRows("DEAD") == 2 })
	var lastErr string
	var withID int
	if err := e.s.Pool().QueryRow(context.Background(), `SELECT min(last_error), count(*) FILTER (WHERE id > 0) FROM `+e.s.Tables().Outbox+` WHERE status = 'DEAD'`).Scan(&lastErr, &withID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lastErr, "permanent") || !strings.Contains(lastErr, "over the limit") {
		t.Errorf("last_error %q", lastErr)
	}
	got, _ := firsts(b.Messages())
	checkOrder(t, got, map[string]int{"p": 2, "q": 1})
	r.stop(t)
}

// While the broker is down the stream pauses (nothing is confirmed, the
// slot holds the log); when it is back every event is delivered, in order.
func TestBrokerDownAndUp(t *testing.T) {
	e := newEnv(t)
	b := membroker.New(membroker.Options{})
	r := e.start(e.slot(), b, nil)
	e.write(false, ev("d", 0))
	testenv.WaitFor(t, 20*time.Second, "first event", func() bool { return len(b.Messages()) == 1 })
	b.SetDown(true)
	for i := 1; i < 20; i++ {
		e.write(i%2 == 0, ev("d", i), ev("e", i))
	}
	time.Sleep(time.Second)
	if n := len(b.Messages()); n != 1 {
		t.Fatalf("%d messages while the broker was down", n)
	}
	if n := e.countRows("PENDING"); n != 20 {
		t.Errorf("%d PENDING rows while down, want 20 (nothing archived before the broker confirmed)", n)
	}
	b.SetDown(false)
	got, _ := waitFirsts(t, b.Messages, 30*time.Second, "39 events", 39)
	next := map[string]int{"d": 0, "e": 1}
	for _, m := range got {
		agg, n := seq(m)
		if n != next[agg] {
			t.Fatalf("aggregate %s: %d when %d was due", agg, n, next[agg])
		}
		next[agg]++
	}
	if e.countRows("DEAD") != 0 {
		t.Error("an outage made events DEAD")
	}
	r.stop(t)
}

// A second relay on the same slot waits as standby and takes over when the
// first stops; nothing is lost across the handover.
func TestStandbyTakesOver(t *testing.T) {
	e := newEnv(t)
	slot := e.slot()
	b := membroker.New(membroker.Options{})
	first := e.start(slot, b, nil)
	e.write(false, ev("s", 0))
	testenv.WaitFor(t, 20*time.Second, "first relay delivering", func() bool { return len(b.Messages()) == 1 })
	second := e.startAs(slot, b, nil, true)
	time.Sleep(800 * time.Millisecond) // the standby tries and is refused
	e.write(true, ev("s", 1))
	waitFirsts(t, b.Messages, 20*time.Second, "event 1", 2)
	first.stop(t)
	for i := 2; i < 12; i++ {
		e.write(i%2 == 0, ev("s", i))
	}
	got, _ := waitFirsts(t, b.Messages, 30*time.Second, "the standby delivering", 12)
	checkOrder(t, got, map[string]int{"s": 12})
	second.stop(t)
}

// A slot whose relay is gone is reported: its lag in bytes and seconds
// grows in SlotLags (txbox stats) and in the metrics of a relay still
// running on another slot.
func TestSlotLeftBehindIsReported(t *testing.T) {
	e := newEnv(t)
	left := e.slot()
	b := membroker.New(membroker.Options{})
	r := e.start(left, b, nil)
	e.write(false, ev("l", 0))
	testenv.WaitFor(t, 20*time.Second, "first event", func() bool { return len(b.Messages()) == 1 && e.countRows("PENDING") == 0 })
	r.stop(t)
	for i := 1; i < 50; i++ {
		e.write(false, ev("l", i))
	}
	reg := prometheus.NewRegistry()
	other := e.start(e.slot(), membroker.New(membroker.Options{}), func(c *cdc.Config) {
		c.Relay.Metrics = prom.NewRelayMetrics(reg)
		c.Relay.MetricsInterval = 100 * time.Millisecond
	})
	time.Sleep(1500 * time.Millisecond)
	lags, err := cdc.SlotLags(context.Background(), e.s)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, l := range lags {
		if l.Slot != left {
			continue
		}
		found = true
		if l.Active || !l.Exists || l.Bytes <= 0 || l.Seconds < 1 {
			t.Errorf("left-behind slot reported as %+v", l)
		}
	}
	if !found {
		t.Fatalf("slot %s not in %+v", left, lags)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var bytes float64 = -1
	for _, mf := range mfs {
		if mf.GetName() != "txbox_cdc_slot_lag_bytes" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == left {
				bytes = m.GetGauge().GetValue()
			}
		}
	}
	if bytes <= 0 {
		t.Errorf("txbox_cdc_slot_lag_bytes{slot=%q} = %v, want > 0", left, bytes)
	}
	other.stop(t)
}

// killer publishes through the broker and, on its trigger, terminates the
// relay's walsender before answering: the broker has the events, the relay
// records them, but the confirmation never reaches PostgreSQL. The events
// come again from the slot, with the same ids.
type killer struct {
	*membroker.Broker
	e    *env
	slot string
	cut  atomic.Bool
}

func (k *killer) Publish(ctx context.Context, msgs []broker.Message) []error {
	errs := k.Broker.Publish(ctx, msgs)
	if k.cut.Load() {
		_, err := k.e.s.Pool().Exec(context.Background(), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1`, k.slot)
		if err != nil {
			k.e.t.Error(err)
		}
	}
	return errs
}

// A relay cut off between publish and confirm republishes from the slot:
// the copies carry the same event ids (what the inbox and Nats-Msg-Id
// absorb), and the first copies are complete and in order.
func TestCutBetweenPublishAndConfirmRepublishes(t *testing.T) {
	e := newEnv(t)
	slot := e.slot()
	k := &killer{Broker: membroker.New(membroker.Options{}), e: e, slot: slot}
	r := e.start(slot, k, nil)
	e.write(false, ev("k", 0))
	testenv.WaitFor(t, 20*time.Second, "first event", func() bool { return len(k.Messages()) == 1 })
	k.cut.Store(true) // every publish from now on cuts the walsender once more
	e.write(false, ev("k", 1), ev("k", 2))
	e.write(true, ev("k", 3))
	testenv.WaitFor(t, 20*time.Second, "a republished copy", func() bool { _, dups := firsts(k.Messages()); return dups > 0 })
	k.cut.Store(false)
	e.write(false, ev("k", 4))
	testenv.WaitFor(t, 30*time.Second, "5 events", func() bool { f, _ := firsts(k.Messages()); return len(f) == 5 })
	got, dups := firsts(k.Messages())
	checkOrder(t, got, map[string]int{"k": 5})
	t.Logf("%d copies republished with their ids", dups)
	r.stop(t)
}
