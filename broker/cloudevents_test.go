package broker_test

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// wire turns attributes into the lookup a binding gives EventFromAttributes.
func wire(attrs [][2]string) (func(string) (string, bool), []string) {
	m := map[string]string{}
	var names []string
	for _, a := range attrs {
		m[a[0]] = a[1]
		names = append(names, a[0])
	}
	return func(n string) (string, bool) { v, ok := m[n]; return v, ok }, names
}

func roundTrip(t testing.TB, msg broker.Message) (txbox.Event, error) {
	attrs, err := broker.Attributes(msg)
	if err != nil {
		return txbox.Event{}, err
	}
	get, names := wire(attrs)
	return broker.EventFromAttributes(get, names, msg.Event.Payload)
}

func sameEvent(a, b txbox.Event) bool {
	return a.ID == b.ID && a.Type == b.Type && a.AggregateType == b.AggregateType &&
		a.AggregateID == b.AggregateID && a.AggregateVersion == b.AggregateVersion &&
		a.OccurredAt.Equal(b.OccurredAt) && bytes.Equal(a.Payload, b.Payload) &&
		len(a.Headers) == len(b.Headers) && (len(a.Headers) == 0 || maps.Equal(a.Headers, b.Headers))
}

// TestAttributesRoundTrip: every envelope field survives the mapping to
// CloudEvents attributes and back, time to the nanosecond, and the core
// attributes come first in a fixed order.
func TestAttributesRoundTrip(t *testing.T) {
	e := txbox.Event{
		ID: txbox.NewID(), Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1",
		AggregateVersion: 12, OccurredAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("X", -7*3600)),
		Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "t1"},
		Payload: []byte(`{"a":1}`),
	}
	attrs, err := broker.Attributes(broker.Message{Event: e, Topic: "x", Source: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	wantOrder := []string{"specversion", "id", "type", "source", "subject", "time", "datacontenttype", "aggregatetype", "aggregateversion", "tenant", "traceparent"}
	if len(attrs) != len(wantOrder) {
		t.Fatalf("attributes %v, want names %v", attrs, wantOrder)
	}
	for i, n := range wantOrder {
		if attrs[i][0] != n {
			t.Errorf("attribute %d = %q, want %q", i, attrs[i][0], n)
		}
	}
	get, names := wire(attrs)
	if v, _ := get("source"); v != "svc" {
		t.Errorf("source = %q", v)
	}
	if v, _ := get("time"); v != "2025-01-02T10:04:05.000000006Z" {
		t.Errorf("time = %q, want UTC RFC 3339 with nanoseconds", v)
	}
	got, err := broker.EventFromAttributes(get, names, e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if !sameEvent(got, e) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
	}

	// Optional parts stay optional: no version, no headers, default source.
	e.AggregateVersion, e.Headers = 0, nil
	attrs, _ = broker.Attributes(broker.Message{Event: e})
	get, _ = wire(attrs)
	if _, ok := get("aggregateversion"); ok {
		t.Error("aggregateversion sent for an unversioned event")
	}
	if v, _ := get("source"); v != "txbox" {
		t.Errorf("default source = %q, want txbox", v)
	}
	if got, err := roundTrip(t, broker.Message{Event: e}); err != nil || !sameEvent(got, e) {
		t.Errorf("unversioned round trip = %+v, %v", got, err)
	}
}

func TestAttributesRejectsUnusableHeaders(t *testing.T) {
	for _, name := range []string{"Trace", "trace-parent", "x_y", "", "aaaaaaaaaaaaaaaaaaaaa", "id", "source", "data"} {
		e := txbox.MustEvent("A", "1", "T", nil)
		e.Headers = map[string]string{name: "v"}
		_, err := broker.Attributes(broker.Message{Event: e})
		if !errors.Is(err, txbox.ErrPermanent) || !errors.Is(err, txbox.ErrInvalidEvent) {
			t.Errorf("header %q: err = %v, want permanent invalid event", name, err)
		}
	}
}

func TestEventFromAttributesRejects(t *testing.T) {
	good := map[string]string{"specversion": "1.0", "id": "1", "type": "T", "subject": "a1", "aggregatetype": "A"}
	for name, change := range map[string]func(map[string]string){
		"no specversion":    func(m map[string]string) { delete(m, "specversion") },
		"specversion 0.3":   func(m map[string]string) { m["specversion"] = "0.3" },
		"no id":             func(m map[string]string) { delete(m, "id") },
		"no type":           func(m map[string]string) { delete(m, "type") },
		"bad time":          func(m map[string]string) { m["time"] = "noon" },
		"bad version":       func(m map[string]string) { m["aggregateversion"] = "v2" },
		"negative version":  func(m map[string]string) { m["aggregateversion"] = "-1" },
		"xml content":       func(m map[string]string) { m["datacontenttype"] = "application/xml" },
		"no aggregate type": func(m map[string]string) { delete(m, "aggregatetype") },
		"no aggregate id":   func(m map[string]string) { delete(m, "subject") },
		"body is not json":  func(m map[string]string) { m["body"] = "{" },
		"id too long":       func(m map[string]string) { m["id"] = string(bytes.Repeat([]byte("x"), 65)) },
	} {
		m := maps.Clone(good)
		change(m)
		body := []byte(`{}`)
		if b, ok := m["body"]; ok {
			body = []byte(b)
			delete(m, "body")
		}
		_, err := broker.EventFromAttributes(func(n string) (string, bool) { v, ok := m[n]; return v, ok }, nil, body)
		if !errors.Is(err, txbox.ErrPermanent) {
			t.Errorf("%s: err = %v, want permanent", name, err)
		}
	}
}

// FuzzAttributes: any event Attributes accepts comes back equal, and no
// input panics.
func FuzzAttributes(f *testing.F) {
	f.Add("id-1", "T", "A", "a-1", int64(3), int64(1700000000123456789), "traceparent", "00-x-y-01", []byte(`{"a":1}`), "src")
	f.Add("", "", "", "", int64(-1), int64(0), "Bad Name", "v\r\n", []byte(`{`), "")
	f.Add("ü", "t", "a", " ", int64(1<<62), int64(-1), "id", "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, id, typ, aggType, aggID string, version, unixNano int64, hk, hv string, payload []byte, source string) {
		e := txbox.Event{
			ID: id, Type: typ, AggregateType: aggType, AggregateID: aggID, AggregateVersion: version,
			OccurredAt: time.Unix(0, unixNano), Headers: map[string]string{hk: hv}, Payload: payload,
		}
		got, err := roundTrip(t, broker.Message{Event: e, Source: source})
		if err != nil {
			if !errors.Is(err, txbox.ErrPermanent) {
				t.Fatalf("error %v is not permanent", err)
			}
			return
		}
		if e.AggregateVersion < 0 {
			e.AggregateVersion = 0 // not sent: "not versioned"
		}
		if !sameEvent(got, e) {
			t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", got, e)
		}
	})
}

// FuzzEventFromAttributes: arbitrary attributes and body never panic; an
// error is always permanent; a decoded event is valid and encodes again to
// the same event.
func FuzzEventFromAttributes(f *testing.F) {
	f.Add("1.0", "id", "T", "a1", "A", "2", "2024-01-01T00:00:00Z", "application/json", "traceparent", "v", []byte(`{}`))
	f.Add("1.0", "", "", "", "", "x", "yesterday", "text/plain", "", "", []byte(`not json`))
	f.Add("0.3", "id", "T", "a1", "A", "", "", "", "source", "s", []byte(nil))
	f.Fuzz(func(t *testing.T, spec, id, typ, subject, aggType, version, tm, ct, extName, extVal string, body []byte) {
		m := map[string]string{}
		for k, v := range map[string]string{"specversion": spec, "id": id, "type": typ, "subject": subject,
			"aggregatetype": aggType, "aggregateversion": version, "time": tm, "datacontenttype": ct} {
			if v != "" {
				m[k] = v
			}
		}
		names := []string{"specversion", "id", "type", "subject", "aggregatetype", "aggregateversion", "time", "datacontenttype"}
		if extName != "" {
			if _, core := m[extName]; !core {
				m[extName] = extVal
			}
			names = append(names, extName)
		}
		e, err := broker.EventFromAttributes(func(n string) (string, bool) { v, ok := m[n]; return v, ok }, names, body)
		if err != nil {
			if !errors.Is(err, txbox.ErrPermanent) {
				t.Fatalf("error %v is not permanent", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("decoded an invalid event %+v: %v", e, err)
		}
		again, err := roundTrip(t, broker.Message{Event: e})
		if err != nil {
			return // e.g. an extension name Attributes refuses to send
		}
		if !sameEvent(again, e) {
			t.Fatalf("re-encoding changed the event:\n got %+v\nwant %+v", again, e)
		}
	})
}

// An event's aggregate version is an attribute only when it is versioned
// (above 0): 0 means "not versioned", and a missing attribute reads back as
// 0.
func TestAggregateVersionOnlyWhenVersioned(t *testing.T) {
	for _, c := range []struct {
		version int64
		want    string
	}{{0, ""}, {1, "1"}, {42, "42"}} {
		e := txbox.MustEvent("Order", "o-1", "OrderPlaced", map[string]int{"n": 1})
		e.AggregateVersion = c.version
		attrs, err := broker.Attributes(broker.Message{Event: e})
		if err != nil {
			t.Fatal(err)
		}
		get, _ := wire(attrs)
		got, ok := get(broker.AttrAggregateVersion)
		if ok != (c.want != "") || got != c.want {
			t.Fatalf("version %d: aggregateversion %q (present %v), want %q", c.version, got, ok, c.want)
		}
		back, err := roundTrip(t, broker.Message{Event: e})
		if err != nil || back.AggregateVersion != c.version {
			t.Fatalf("version %d reads back as %d (%v)", c.version, back.AggregateVersion, err)
		}
	}
}

// Every document that lists the aggregateversion attribute says when it
// is sent: a reader must not expect it on events that are not versioned.
func TestDocsSayWhenAggregateVersionIsSent(t *testing.T) {
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md")
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, para := range strings.Split(string(b), "\n\n") {
			if !strings.Contains(para, "aggregateversion") {
				continue
			}
			found++
			if !strings.Contains(para, "above 0") {
				t.Errorf("%s lists aggregateversion without saying it is sent only above 0:\n%s", f, para)
			}
		}
	}
	if found == 0 {
		t.Fatal("no document lists the aggregateversion attribute")
	}
}
