package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/sqlite"
)

// countingDialect counts how often the writer prepares it and inserts.
type countingDialect struct {
	prepares, inserts *int
	prepErr           error
}

func (countingDialect) Name() string { return "counting" }

func (d countingDialect) InsertEvents(context.Context, store.Tx, []txbox.Event) error {
	*d.inserts++
	return nil
}

func (d countingDialect) Prepare() (store.Dialect, error) {
	*d.prepares++
	return d, d.prepErr
}

// noSQLTx fails the test on any statement.
type noSQLTx struct{ t *testing.T }

func (tx noSQLTx) Exec(context.Context, string, ...any) (int64, error) {
	tx.t.Fatal("SQL ran")
	return 0, nil
}

func (tx noSQLTx) QueryRow(context.Context, string, ...any) store.Row {
	tx.t.Fatal("SQL ran")
	return nil
}

func TestWriterPreparesDialectOnce(t *testing.T) {
	var prepares, inserts int
	w := outbox.NewWriter(countingDialect{prepares: &prepares, inserts: &inserts})
	for range 5 {
		if err := w.Add(context.Background(), nil, txbox.MustEvent("A", "1", "X", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if prepares != 1 || inserts != 5 {
		t.Fatalf("prepares=%d inserts=%d, want 1 and 5", prepares, inserts)
	}

	// A configuration error found at construction is every Add's error,
	// after the events were checked, and no SQL runs.
	bad := errors.New("bad tables")
	prepares, inserts = 0, 0
	w = outbox.NewWriter(countingDialect{prepares: &prepares, inserts: &inserts, prepErr: bad})
	for range 2 {
		if err := w.Add(context.Background(), nil, txbox.MustEvent("A", "1", "X", nil)); !errors.Is(err, bad) {
			t.Fatalf("err = %v", err)
		}
	}
	if err := w.Add(context.Background(), nil, txbox.Event{Type: "X", AggregateType: "A"}); !errors.Is(err, txbox.ErrInvalidEvent) {
		t.Fatalf("an invalid event must be reported before the dialect's error: %v", err)
	}
	if prepares != 1 || inserts != 0 {
		t.Fatalf("prepares=%d inserts=%d, want 1 and 0", prepares, inserts)
	}
}

// TestWriterBadTableNames: every dialect rejects a table name that is not a
// plain identifier with a configuration error naming the setting, before
// any SQL, as InsertEvents itself does.
func TestWriterBadTableNames(t *testing.T) {
	tables := store.Tables{Outbox: "outbox; DROP TABLE x"}
	for _, d := range []store.Dialect{postgres.Dialect{Tables: tables}, mysql.Dialect{Tables: tables}, sqlite.Dialect{Tables: tables}} {
		w := outbox.NewWriter(d)
		err := w.Add(context.Background(), noSQLTx{t}, txbox.MustEvent("A", "1", "X", nil))
		var ce *txbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Tables.Outbox" {
			t.Fatalf("%s writer: err = %v", d.Name(), err)
		}
		err = d.InsertEvents(context.Background(), noSQLTx{t}, []txbox.Event{txbox.MustEvent("A", "1", "X", nil)})
		if !errors.As(err, &ce) || ce.Field != "Tables.Outbox" {
			t.Fatalf("%s InsertEvents: err = %v", d.Name(), err)
		}
	}
	w := outbox.NewWriter(sqlite.Dialect{Tables: store.Tables{Schema: "main"}})
	if err := w.Add(context.Background(), noSQLTx{t}, txbox.MustEvent("A", "1", "X", nil)); !errors.Is(err, txbox.ErrConfig) {
		t.Fatalf("sqlite schema: err = %v", err)
	}
}

// TestInvalidPayloadRejected: NewEvent still refuses raw bytes that are not
// JSON, and Add refuses a hand-built event with such a payload before SQL.
func TestInvalidPayloadRejected(t *testing.T) {
	for _, p := range []any{json.RawMessage(`{"a":`), []byte("nope"), json.RawMessage{}} {
		if _, err := txbox.NewEvent("A", "1", "X", p); !errors.Is(err, txbox.ErrInvalidEvent) || !strings.Contains(err.Error(), "not valid JSON") {
			t.Fatalf("NewEvent(%q): err = %v", p, err)
		}
	}
	if _, err := txbox.NewEvent("A", "", "X", map[string]int{"a": 1}); !errors.Is(err, txbox.ErrInvalidEvent) || !strings.Contains(err.Error(), "aggregate id") {
		t.Fatalf("NewEvent without aggregate id: err = %v", err)
	}
	if _, err := txbox.NewEvent("A", "1", "X", func() {}); !errors.Is(err, txbox.ErrInvalidEvent) {
		t.Fatalf("NewEvent(func): err = %v", err)
	}

	w := outbox.NewWriter(postgres.Dialect{})
	ev := txbox.MustEvent("A", "1", "X", map[string]int{"a": 1})
	ev.Payload = json.RawMessage(`{"a":1`)
	err := w.Add(context.Background(), noSQLTx{t}, ev)
	if !errors.Is(err, txbox.ErrInvalidEvent) || !strings.Contains(err.Error(), "event 0") || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("Add: err = %v", err)
	}
}

// recordingTx records the statements it is given.
type recordingTx struct{ queries []string }

func (tx *recordingTx) Exec(_ context.Context, q string, _ ...any) (int64, error) {
	tx.queries = append(tx.queries, q)
	return 1, nil
}

func (tx *recordingTx) QueryRow(context.Context, string, ...any) store.Row { return nil }

// WithCDCMessages: PostgreSQL emits logical decoding messages and inserts
// no row; a dialect without a change log fails every Add with
// ErrNoCDCMessages and runs no SQL.
func TestWithCDCMessages(t *testing.T) {
	tx := &recordingTx{}
	w := outbox.NewWriter(postgres.Dialect{}, outbox.WithCDCMessages(), outbox.WithWakeup())
	if err := w.Add(context.Background(), tx, txbox.MustEvent("A", "1", "X", nil), txbox.MustEvent("A", "1", "Y", nil)); err != nil {
		t.Fatal(err)
	}
	if len(tx.queries) != 1 || !strings.Contains(tx.queries[0], "pg_logical_emit_message(true") || strings.Contains(tx.queries[0], "INSERT") {
		t.Fatalf("statements: %q", tx.queries)
	}
	for _, d := range []store.Dialect{mysql.Dialect{}, sqlite.Dialect{}, countingDialect{prepares: new(int), inserts: new(int)}} {
		w := outbox.NewWriter(d, outbox.WithCDCMessages())
		if err := w.Add(context.Background(), noSQLTx{t}, txbox.MustEvent("A", "1", "X", nil)); !errors.Is(err, outbox.ErrNoCDCMessages) {
			t.Fatalf("%s: err = %v", d.Name(), err)
		}
	}
}
