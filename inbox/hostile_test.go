package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
)

// withDialect is an inbox store whose inbox SQL is d.
type withDialect struct {
	store.InboxStore[*sql.Tx]
	d store.InboxDialect
}

func (w withDialect) InboxDialect() store.InboxDialect { return w.d }

// applied counts handler runs per event id.
type applied struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *applied) handle(_ context.Context, _ *sql.Tx, ev txbox.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[ev.ID]++
	return nil
}

func (a *applied) get() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.n)
}

// ceHeaders is the wire form of a good event, as mem's Publish makes it.
func ceHeaders(t *testing.T, ev txbox.Event) map[string]string {
	t.Helper()
	attrs, err := broker.Attributes(broker.Message{Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{}
	for _, a := range attrs {
		h[membroker.HeaderPrefix+a[0]] = a[1]
	}
	return h
}

// hostileMsg is one message a foreign or broken producer might publish.
type hostileMsg struct {
	name    string
	change  func(h map[string]string) // edits a good event's headers; nil: no headers at all
	body    string                    // "" keeps the good event's body
	reason  string                    // in the parked row's error_message
	perDial map[string]string         // dialect -> reason, when it differs; "processed" when the dialect takes it as an event
}

func hostileMessages() []hostileMsg {
	set := func(k, v string) func(map[string]string) { return func(h map[string]string) { h["ce-"+k] = v } }
	del := func(k string) func(map[string]string) { return func(h map[string]string) { delete(h, "ce-"+k) } }
	keep := func(map[string]string) {}
	return []hostileMsg{
		{name: "not a CloudEvent", body: "\xff\xfe not json", reason: "specversion"},
		{name: "no id", change: del("id"), reason: "no id"},
		{name: "bad time", change: set("time", "yesterday"), reason: `time "yesterday"`},
		{name: "bad aggregateversion", change: set("aggregateversion", "v2"), reason: `aggregateversion "v2"`},
		{name: "aggregateversion overflows int64", change: set("aggregateversion", "99999999999999999999"), reason: "value out of range"},
		{name: "negative aggregateversion", change: set("aggregateversion", "-1"), reason: "negative aggregate version"},
		{name: "id of 65 characters", change: set("id", strings.Repeat("i", 65)), reason: "id longer than 64"},
		{name: "id of 10 KB", change: set("id", strings.Repeat("i", 10<<10)), reason: "id longer than 64"},
		{name: "id not valid UTF-8", change: set("id", "\xff\xfe-"+txbox.NewID()[:20]), reason: "id is not valid UTF-8"},
		{name: "id with a NUL byte", change: set("id", "a\x00b"), reason: "id has a NUL byte"},
		{name: "type not valid UTF-8", change: set("type", "Order\xffCreated"), reason: "event type is not valid UTF-8"},
		{name: "subject not valid UTF-8", change: set("subject", "o-\xff"), reason: "aggregate id is not valid UTF-8"},
		{name: "no subject", change: del("subject"), reason: "empty aggregate id"},
		{name: "extension value not valid UTF-8", change: set("note", "\xff"), reason: `header "note" is not valid UTF-8`},
		{name: "extension value with a NUL byte", change: set("note", "a\x00"), reason: `header "note" has a NUL byte`},
		{name: "payload with bad UTF-8 in a string", change: keep, body: "{\"a\": \"\xff\"}", reason: "payload is not valid UTF-8"},
		{name: "payload not JSON", change: keep, body: `{"a": `, reason: "payload is not valid JSON"},
		{name: "datacontenttype XML", change: set("datacontenttype", "application/xml"), reason: "datacontenttype"},
		{name: "specversion 0.3", change: set("specversion", "0.3"), reason: "specversion"},
		// MySQL's PAD SPACE key comparison cannot keep this id apart from
		// "...-x": the store refuses it (txbox.ErrInvalidEvent) and the
		// consumer parks it. PostgreSQL and SQLite compare exactly and run it.
		{name: "id ending in a space", change: set("id", txbox.NewID()[:30]+" "), reason: "ends in a space",
			perDial: map[string]string{"postgres": "processed", "sqlite": "processed"}},
	}
}

func TestHostileMessagesPostgres(t *testing.T) { runHostileMessages(t, storeenv.Postgres{}) }
func TestHostileMessagesSQLite(t *testing.T)   { runHostileMessages(t, storeenv.SQLite{}) }
func TestHostileMessagesMariaDB(t *testing.T)  { runHostileMessages(t, storeenv.MySQL{}) }

// runHostileMessages: each hostile message is parked (DEAD, event type
// store.UndecodableType) with its reason, acknowledged once and not seen
// again, and the good event published right after it is processed.
func runHostileMessages(t *testing.T, h harness) {
	s, db := openInboxStore(t, h)
	dialect := s.Dialect().Name()
	b := membroker.New(membroker.Options{AckWait: 5 * time.Second})
	sub := &counting{Subscriber: b.Subscribe("hostile")}
	var app applied
	c, err := inbox.New(sqlInbox(t, s, db), inbox.Config{
		Name: "hostile", Subscriber: sub,
		MaxAttempts: 3, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		ReplayInterval: 50 * time.Millisecond, Logger: quiet(),
	}, app.handle)
	if err != nil {
		t.Fatal(err)
	}

	type parked struct {
		msg hostileMsg
		id  string // mem's message id, "" when the store refused the event id itself
	}
	var want []parked
	var good []txbox.Event
	seq := 0
	publish := func(topic string, h map[string]string, body []byte) {
		b.PublishRaw(topic, h, body)
		seq++
	}
	for i, m := range hostileMessages() {
		ev := txbox.MustEvent("Order", fmt.Sprintf("o-%d", i), "OrderCreated", map[string]int{"i": i})
		var hd map[string]string
		if m.change != nil {
			hd = ceHeaders(t, ev)
			m.change(hd)
		}
		body := ev.Payload
		if m.body != "" {
			body = []byte(m.body)
		}
		publish("orders.Order.OrderCreated", hd, body)
		switch r := m.perDial[dialect]; {
		case r == "processed":
			good = append(good, txbox.Event{ID: hd["ce-id"]})
		case r != "":
			m.reason = r
			fallthrough
		default:
			id := fmt.Sprintf("mem-%d", seq)
			if m.name == "id ending in a space" {
				id = "" // refused by the store: parked under a synthetic id
			}
			want = append(want, parked{m, id})
		}
		next := txbox.MustEvent("Order", fmt.Sprintf("o-%d", i), "OrderShipped", nil)
		publish("orders.Order.OrderShipped", ceHeaders(t, next), next.Payload)
		good = append(good, next)
	}

	testenv.Go(t, c.Run)

	testenv.WaitFor(t, 20*time.Second, "every good event processed and every hostile one parked", func() bool {
		return c.Stats().Processed == int64(len(good)) && c.Stats().Undecodable == int64(len(want))
	})
	// Longer than any backoff: nothing comes back.
	time.Sleep(300 * time.Millisecond)
	if n := sub.n.Load(); n != int64(seq) {
		t.Errorf("%d deliveries for %d messages: something was redelivered instead of parked or processed", n, seq)
	}
	got := app.get()
	for _, e := range good {
		if got[e.ID] != 1 {
			t.Errorf("good event %q applied %d times, want 1", e.ID, got[e.ID])
		}
	}
	if len(got) != len(good) {
		t.Errorf("handler ran for %d events, want %d", len(got), len(good))
	}
	if c := c.Stats(); c.Failed != 0 || c.Parked != 0 {
		t.Errorf("failed %d, parked %d: a hostile message reached the handler", c.Failed, c.Parked)
	}

	rows, err := s.(store.InboxAdmin).InboxList(context.Background(), store.InboxFilter{Consumer: "hostile", Status: txbox.StatusDead, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]store.InboxRow{}
	for _, r := range rows {
		byID[r.EventID] = r
		if r.EventType != store.UndecodableType || !strings.HasPrefix(r.ErrorMessage, "undecodable: ") || len(r.Event.Payload) == 0 || r.RetryCount != 1 {
			t.Errorf("parked row %q: type %q, attempts %d, error %q, %d payload bytes", r.EventID, r.EventType, r.RetryCount, r.ErrorMessage, len(r.Event.Payload))
		}
	}
	if len(rows) != len(want) {
		t.Errorf("%d parked rows, want %d", len(rows), len(want))
	}
	for _, p := range want {
		var r store.InboxRow
		var ok bool
		if p.id != "" {
			r, ok = byID[p.id]
		} else {
			for _, x := range rows {
				if strings.HasPrefix(x.EventID, "raw-") && strings.Contains(x.ErrorMessage, p.msg.reason) {
					r, ok = x, true
				}
			}
		}
		if !ok {
			t.Errorf("%s: not parked", p.msg.name)
			continue
		}
		if !strings.Contains(r.ErrorMessage, p.msg.reason) {
			t.Errorf("%s: parked with %q, want the reason %q", p.msg.name, r.ErrorMessage, p.msg.reason)
		}
	}
}

func TestUnusableBrokerIDParkedOncePostgres(t *testing.T) { unusableBrokerID(t, storeenv.Postgres{}) }
func TestUnusableBrokerIDParkedOnceSQLite(t *testing.T)   { unusableBrokerID(t, storeenv.SQLite{}) }
func TestUnusableBrokerIDParkedOnceMariaDB(t *testing.T)  { unusableBrokerID(t, storeenv.MySQL{}) }

// unusableBrokerID: an undecodable message whose broker id cannot key an
// inbox row (bad UTF-8, NUL, too long, a trailing space, empty) is parked
// under a synthetic id instead of failing to park on every redelivery; a
// redelivery (the first ack was lost) lands on the same row.
func unusableBrokerID(t *testing.T, h harness) {
	s, db := openInboxStore(t, h)
	c, err := inbox.New(sqlInbox(t, s, db), inbox.Config{Name: "ids", Subscriber: membroker.New(membroker.Options{}).Subscribe("ids"), Logger: quiet()},
		func(context.Context, *sql.Tx, txbox.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := map[string]string{
		"not valid UTF-8":   "\xff\xfe\xfd",
		"NUL byte":          "id\x00",
		"65 characters":     strings.Repeat("n", 65),
		"trailing space":    "msg-1 ",
		"empty":             "",
		"bad UTF-8, no NUL": "ok-\xc3",
	}
	for name, id := range ids {
		raw := broker.RawMessage{Topic: "t.\xff.x", ID: id, Headers: map[string]string{"Nats-Msg-Id": id, "b": "2", "a": "1", "c": "\xff"}, Body: []byte("\x00\xff junk")}
		cause := txbox.Permanent(fmt.Errorf("%w: not a txbox CloudEvent: %s", txbox.ErrInvalidEvent, name))
		first := &fake{err: cause, raw: raw, ackErr: errors.New("ack lost")}
		c.HandleBatch(ctx, []broker.Delivery{first})
		again := &fake{err: cause, raw: raw}
		c.HandleBatch(ctx, []broker.Delivery{again})
		if first.settled != 1 || again.settled != 1 || !again.acked {
			t.Errorf("%s: first settled %d, redelivery settled %d acked %v (naked for %v)", name, first.settled, again.settled, again.acked, again.nakedIn)
		}
	}
	rows, err := s.(store.InboxAdmin).InboxList(ctx, store.InboxFilter{Consumer: "ids", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(ids) {
		t.Errorf("%d inbox rows for %d messages (each delivered twice): want one row each", len(rows), len(ids))
	}
	for _, r := range rows {
		if !strings.HasPrefix(r.EventID, "raw-") || r.Status != txbox.StatusDead || r.RetryCount != 2 || r.EventType != store.UndecodableType {
			t.Errorf("row %q: status %s, attempts %d, type %q; want a synthetic id, DEAD after 2 deliveries", r.EventID, r.Status, r.RetryCount, r.EventType)
		}
	}
}

// flaky fails InboxAcquire and InboxFail with err, n times each.
type flaky struct {
	store.InboxDialect
	acquire, fail atomic.Int32
	err           error
}

func (f *flaky) InboxAcquire(ctx context.Context, tx store.Tx, consumer string, e txbox.Event) (store.InboxState, int, error) {
	if f.acquire.Add(-1) >= 0 {
		return 0, 0, f.err
	}
	return f.InboxDialect.InboxAcquire(ctx, tx, consumer, e)
}

func (f *flaky) InboxFail(ctx context.Context, tx store.Tx, consumer string, e txbox.Event, msg string, max int, again txbox.Status) (int, bool, error) {
	if f.fail.Add(-1) >= 0 {
		return 0, false, f.err
	}
	return f.InboxDialect.InboxFail(ctx, tx, consumer, e, msg, max, again)
}

// TestStoreErrorsRedeliverOnlyDataIsParked: a store error that is not about
// the data (a lost connection) sends the delivery back, for the event and
// for parking an undecodable message alike; only an error wrapping
// txbox.ErrInvalidEvent, the store refusing the event's data, parks it.
func TestStoreErrorsRedeliverOnlyDataIsParked(t *testing.T) {
	s, db := openInboxStore(t, storeenv.Postgres{})
	d := &flaky{InboxDialect: s.(interface{ InboxDialect() store.InboxDialect }).InboxDialect(), err: errors.New("postgres: inbox insert: read tcp: connection reset by peer")}
	var app applied
	c, err := inbox.New(withDialect{sqlInbox(t, s, db), d}, inbox.Config{Name: "flaky", Subscriber: membroker.New(membroker.Options{}).Subscribe("flaky"), Logger: quiet(),
		BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}, app.handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := s.(store.InboxAdmin)

	// A good event while the connection fails twice: sent back twice, then
	// processed. Nothing parked.
	ev := txbox.MustEvent("Order", "o-1", "OrderCreated", nil)
	d.acquire.Store(2)
	for i := 1; i <= 3; i++ {
		f := &fake{ev: ev}
		c.HandleBatch(ctx, []broker.Delivery{f})
		if want := i == 3; f.acked != want || f.settled != 1 {
			t.Fatalf("delivery %d: acked %v (naked for %v), want acked %v", i, f.acked, f.nakedIn, want)
		}
	}
	if got := app.get()[ev.ID]; got != 1 || c.Stats().Undecodable != 0 {
		t.Fatalf("applied %d, undecodable %d", got, c.Stats().Undecodable)
	}

	// An undecodable message while the connection fails once: parking fails,
	// so it is sent back, not acknowledged and lost; the next try parks it.
	raw := broker.RawMessage{Topic: "t", ID: "junk-1", Body: []byte("junk")}
	d.fail.Store(1)
	for i := 1; i <= 2; i++ {
		f := &fake{err: txbox.Permanent(fmt.Errorf("%w: not a txbox CloudEvent: no id", txbox.ErrInvalidEvent)), raw: raw}
		c.HandleBatch(ctx, []broker.Delivery{f})
		if want := i == 2; f.acked != want {
			t.Fatalf("undecodable delivery %d: acked %v, want %v", i, f.acked, want)
		}
	}
	rows, err := admin.InboxList(ctx, store.InboxFilter{Consumer: "flaky", EventIDs: []string{"junk-1"}})
	if err != nil || len(rows) != 1 || rows[0].Status != txbox.StatusDead || rows[0].RetryCount != 1 {
		t.Fatalf("parked junk: %v %+v", err, rows)
	}

	// The store refuses the event's data: parked at once, acknowledged, the
	// handler never runs.
	refused := txbox.MustEvent("Order", "o-2", "OrderCreated", nil)
	d.err = fmt.Errorf("%w: store cannot keep this aggregate id", txbox.ErrInvalidEvent)
	d.acquire.Store(1)
	f := &fake{ev: refused}
	c.HandleBatch(ctx, []broker.Delivery{f})
	if !f.acked || app.get()[refused.ID] != 0 {
		t.Fatalf("refused event: acked %v, applied %d", f.acked, app.get()[refused.ID])
	}
	rows, err = admin.InboxList(ctx, store.InboxFilter{Consumer: "flaky", EventIDs: []string{refused.ID}})
	if err != nil || len(rows) != 1 || rows[0].Status != txbox.StatusDead || rows[0].EventType != store.UndecodableType ||
		!strings.Contains(rows[0].ErrorMessage, "store cannot keep this aggregate id") {
		t.Fatalf("refused event's row: %v %+v", err, rows)
	}
	// Redelivered later (the store still refuses): the same row, acknowledged.
	d.acquire.Store(1)
	f = &fake{ev: refused}
	c.HandleBatch(ctx, []broker.Delivery{f})
	if !f.acked || app.get()[refused.ID] != 0 {
		t.Fatalf("refused event redelivered: acked %v, applied %d", f.acked, app.get()[refused.ID])
	}
}

// A consumer name no store can key on is a configuration error at start,
// not a reason to park (or endlessly redeliver) every event.
func TestConsumerNameMustBePlainText(t *testing.T) {
	s, db := openInboxStore(t, storeenv.SQLite{})
	for _, name := range []string{"inv ", " inv", "inv\x00", "inv\xff"} {
		_, err := inbox.New(sqlInbox(t, s, db), inbox.Config{Name: name, Subscriber: membroker.New(membroker.Options{}).Subscribe("x")},
			func(context.Context, *sql.Tx, txbox.Event) error { return nil })
		var ce *txbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Name" {
			t.Errorf("name %q: err = %v, want a config error naming Name", name, err)
		}
	}
}

// With the version guard on MySQL, an aggregate id its key cannot keep
// apart ("o-1 " vs "o-1") is refused by the store on every attempt: the
// event is parked, not redelivered forever, and the next event runs.
func TestVersionGuardRefusedAggregateParkedMariaDB(t *testing.T) {
	s, db := openInboxStore(t, storeenv.MySQL{})
	var app applied
	c, err := inbox.New(sqlInbox(t, s, db), inbox.Config{Name: "guarded", Subscriber: membroker.New(membroker.Options{}).Subscribe("guarded"),
		VersionGuard: true, Logger: quiet()}, app.handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad := txbox.MustEvent("Order", "o-1 ", "OrderCreated", nil)
	bad.AggregateVersion = 1
	good := txbox.MustEvent("Order", "o-2", "OrderCreated", nil)
	good.AggregateVersion = 1
	fb, fg := &fake{ev: bad}, &fake{ev: good}
	c.HandleBatch(ctx, []broker.Delivery{fb, fg})
	if !fb.acked || !fg.acked {
		t.Fatalf("acked: refused %v (naked for %v), good %v", fb.acked, fb.nakedIn, fg.acked)
	}
	if got := app.get(); got[bad.ID] != 0 || got[good.ID] != 1 {
		t.Fatalf("applied: %v", got)
	}
	rows, err := s.(store.InboxAdmin).InboxList(ctx, store.InboxFilter{Consumer: "guarded", EventIDs: []string{bad.ID}})
	if err != nil || len(rows) != 1 || rows[0].Status != txbox.StatusDead || !strings.Contains(rows[0].ErrorMessage, "ends in a space") {
		t.Fatalf("refused event's row: %v %+v", err, rows)
	}
}
