package store_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// FuzzRecordEvent: whatever bytes a foreign producer stored, decoding the
// row never panics; an error is permanent (the relay sends the row to DEAD)
// and names an invalid event; a decoded event is valid, holds only text
// every store keeps, and carries the row's payload unchanged.
func FuzzRecordEvent(f *testing.F) {
	f.Add("0193a5c6-0000-7000-8000-000000000000", "OrderCreated", "Order", "o-1", int64(1), []byte(`{"a":1}`), []byte(`{"traceparent":"00-x-y-01"}`))
	f.Add("", "", "", "", int64(-1), []byte(``), []byte(`null`))
	f.Add("id", "T", "A", "1", int64(0), []byte("{\"a\":\"\xff\"}"), []byte(`[1,2]`))
	f.Add("id", "T\x00", "A", "1", int64(0), []byte(`{}`), []byte(`{"a":1}`))
	f.Add("id", "T", "A", "1", int64(0), []byte(`"x"`), []byte("{\"a\":\"\xff\"}"))
	f.Add("id", "T", "A", "1", int64(0), []byte(`{}`), []byte(`{"a":"\u0000"}`))
	f.Fuzz(func(t *testing.T, id, typ, aggType, aggID string, version int64, payload, headers []byte) {
		r := store.Record{ID: 1, EventID: id, EventType: typ, AggregateType: aggType, AggregateID: aggID, AggregateVersion: version,
			Payload: payload, Headers: headers, CreatedAt: time.Unix(1700000000, 0)}
		e, err := r.Event()
		if err != nil {
			if !errors.Is(err, txbox.ErrPermanent) || !errors.Is(err, txbox.ErrInvalidEvent) {
				t.Fatalf("error %v is not a permanent invalid event", err)
			}
			if last := sqlstore.Truncate("permanent: "+err.Error(), 2000); !utf8.ValidString(last) || strings.IndexByte(last, 0) >= 0 {
				t.Fatalf("last_error %q could not be stored", last)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("decoded an invalid event: %v", err)
		}
		if err := store.CheckText(e); err != nil {
			t.Fatalf("decoded an event no store can keep: %v", err)
		}
		if string(e.Payload) != string(payload) || e.OccurredAt.IsZero() {
			t.Fatalf("payload %q became %q, occurred %v", payload, e.Payload, e.OccurredAt)
		}
		if len(e.Headers) > 0 {
			var h map[string]string
			if err := json.Unmarshal(headers, &h); err != nil || len(h) != len(e.Headers) {
				t.Fatalf("headers %q decoded as %v", headers, e.Headers)
			}
		}
	})
}

var plainIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// FuzzTablesValidate: every name Validate accepts is a plain identifier of
// at most 63 bytes, so configuration can never carry SQL; an error is a
// *txbox.ConfigError naming the field, in one line.
func FuzzTablesValidate(f *testing.F) {
	f.Add("", "outbox_event", "inbox_event")
	f.Add("public", "outbox; DROP TABLE x", "inbox_event")
	f.Add("s\"; --", "o", "i")
	f.Add("a", strings.Repeat("o", 64), "i\n")
	f.Add("a", "outbox_event\n", "Ü")
	f.Add("a.b", "`x`", "[i]")
	f.Fuzz(func(t *testing.T, schema, outbox, inbox string) {
		tb := store.Tables{Schema: schema, Outbox: outbox, Inbox: inbox}
		err := tb.Validate()
		if err != nil {
			var ce *txbox.ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "Tables.") || !errors.Is(err, txbox.ErrConfig) {
				t.Fatalf("error %v is not a config error naming a Tables field", err)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		for _, n := range []string{outbox, inbox} {
			if !plainIdent.MatchString(n) || len(n) > 63 {
				t.Fatalf("accepted %q", n)
			}
		}
		if schema != "" && (!plainIdent.MatchString(schema) || len(schema) > 63) {
			t.Fatalf("accepted schema %q", schema)
		}
		q := tb.Qualified(outbox)
		if strings.ContainsAny(q, " ;'\"`-/*()\x00\n") {
			t.Fatalf("qualified name %q can carry SQL", q)
		}
	})
}
