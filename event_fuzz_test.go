package txbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
)

// FuzzEventValidate: Validate never panics, every error wraps
// ErrInvalidEvent, and an accepted event is within every documented limit.
func FuzzEventValidate(f *testing.F) {
	f.Add("0193a5c6-0000-7000-8000-000000000000", "OrderCreated", "Order", "o-1", int64(1), []byte(`{"a":1}`))
	f.Add("", "", "", "", int64(0), []byte(nil))
	f.Add(strings.Repeat("i", 65), strings.Repeat("t", 129), strings.Repeat("a", 65), strings.Repeat("x", 129), int64(-1), []byte(`{`))
	f.Add("\xff\xfe", "T\x00", "ü", " ", int64(1<<62), []byte("\"\xff\""))
	f.Fuzz(func(t *testing.T, id, typ, aggType, aggID string, version int64, payload []byte) {
		e := txbox.Event{ID: id, Type: typ, AggregateType: aggType, AggregateID: aggID, AggregateVersion: version, Payload: payload, OccurredAt: time.Unix(0, 0)}
		err := e.Validate()
		if err != nil {
			if !errors.Is(err, txbox.ErrInvalidEvent) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q does not wrap ErrInvalidEvent or is not one line", err)
			}
			return
		}
		switch {
		case id == "" || len(id) > 64, typ == "" || len(typ) > 128, aggType == "" || len(aggType) > 64,
			aggID == "" || len(aggID) > 128, version < 0, len(payload) > 0 && !json.Valid(payload):
			t.Fatalf("accepted an event outside the limits: %+v", e)
		}
	})
}

// FuzzMarshalPayload: raw JSON bytes are accepted exactly when they are
// valid JSON and come back unchanged; any string marshals to valid JSON;
// every error wraps ErrInvalidEvent.
func FuzzMarshalPayload(f *testing.F) {
	f.Add([]byte(`{"a": [1, 2.5, "x"]}`), "text")
	f.Add([]byte(`{`), "")
	f.Add([]byte("\"\xff\""), "\xff\x00")
	f.Add([]byte(" null "), "\u2028")
	f.Fuzz(func(t *testing.T, raw []byte, s string) {
		for _, in := range []any{json.RawMessage(raw), raw} {
			got, err := txbox.MarshalPayload(in)
			if err != nil {
				if !errors.Is(err, txbox.ErrInvalidEvent) {
					t.Fatalf("error %v does not wrap ErrInvalidEvent", err)
				}
				if json.Valid(raw) {
					t.Fatalf("valid JSON %q refused: %v", raw, err)
				}
				continue
			}
			if !json.Valid(raw) || !bytes.Equal(got, raw) {
				t.Fatalf("%T %q became %q", in, raw, got)
			}
		}
		for _, in := range []any{s, map[string]string{s: s}, []string{s}} {
			got, err := txbox.MarshalPayload(in)
			if err != nil || !json.Valid(got) {
				t.Fatalf("%#v marshalled to %q, %v", in, got, err)
			}
			if ev, err := txbox.NewEvent("A", "1", "T", in); err != nil || !bytes.Equal(ev.Payload, got) {
				t.Fatalf("NewEvent(%#v): %v", in, err)
			}
		}
	})
}
