package scenario_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
)

// Hostile rows from foreign producers, mixed with 500 good ones, through an
// in-process relay into a NATS server of the test's own (1 MB max_payload).
// Each hostile row is either refused by the database at INSERT (with the
// database's own error, which the test pins per dialect) or accepted and
// then sent to DEAD by the relay with a last_error naming the problem. The
// good rows all arrive, in per-aggregate order; the relay never stops; and
// `txbox stats` agrees with the table.

func TestHostileRowsPostgres(t *testing.T) { hostileRows(t, storeenv.Postgres{}) }
func TestHostileRowsMariaDB(t *testing.T)  { hostileRows(t, storeenv.MySQL{}) }
func TestHostileRowsSQLite(t *testing.T)   { hostileRows(t, storeenv.SQLite{}) }

// hostileRow is one INSERT a foreign producer might send.
type hostileRow struct {
	name                   string
	eventID                string // "" = a fresh UUIDv7
	emptyID                bool   // event_id = ''
	aggType, aggID, evType string
	payload                any // string, or nil for NULL
	headers                any // string, or nil for NULL
	version                int64

	// refused: dialect -> substring of the database's error when the INSERT
	// must fail ("*" for every dialect). A dialect not listed must accept it.
	refused map[string]string
	// dead: substring of last_error once the relay has given up on it; ""
	// means the row is odd but deliverable and must arrive.
	dead string
}

const everyDB = "*"

func hostileRows(t *testing.T, st scenario.Store) {
	s := storeenv.Migrated(t, st.Open(t))
	ctx := context.Background()
	d := brokerenv.NATS{}.Setup(t)
	db := st.SQLDB(t, s)
	dialect := s.Dialect().Name()
	tb := s.Tables()
	table := tb.Qualified(tb.Outbox)
	insertSQL := `INSERT INTO ` + table + ` (event_id, aggregate_type, aggregate_id, event_type, payload, headers, aggregate_version) VALUES (?, ?, ?, ?, ?, ?, ?)`
	if dialect == "postgres" {
		insertSQL = `INSERT INTO ` + table + ` (event_id, aggregate_type, aggregate_id, event_type, payload, headers, aggregate_version) VALUES ($1, $2, $3, $4, $5, $6, $7)`
	}
	insert := func(r hostileRow) (string, error) {
		id := r.eventID
		if id == "" && !r.emptyID {
			id = txbox.NewID()
		}
		_, err := db.ExecContext(ctx, insertSQL, id, r.aggType, r.aggID, r.evType, r.payload, r.headers, r.version)
		return id, err
	}

	dupID := txbox.NewID()
	bad := hostileCases(dupID)
	const goodN, aggs = 500, 25
	var good []txbox.Event
	type accepted struct {
		row hostileRow
		id  string
	}
	var deadRows, oddRows []accepted
	var refusals []string
	b := 0
	for i := range goodN {
		agg := fmt.Sprintf("good-%02d", i%aggs)
		id := txbox.NewID()
		payload := fmt.Sprintf(`{"seq": %d}`, i)
		var headers any
		if i%7 == 0 {
			headers = `{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
		}
		if _, err := insert(hostileRow{eventID: id, aggType: "Item", aggID: agg, evType: "ItemAdded", payload: payload, headers: headers}); err != nil {
			t.Fatalf("good row %d refused: %v", i, err)
		}
		good = append(good, txbox.Event{ID: id, AggregateID: agg})
		// A hostile row after every 20 good ones, often in a good row's
		// aggregate: a DEAD row must not block its aggregate.
		if i%20 == 19 || i == goodN-1 {
			for ; b < len(bad) && (b+1)*(goodN/len(bad)) <= i+1; b++ {
				r := bad[b]
				if r.aggID == "" && r.aggType == "" {
					r.aggType, r.aggID = "Item", agg
				}
				id, err := insert(r)
				want, mustRefuse := r.refused[dialect]
				if !mustRefuse {
					want, mustRefuse = r.refused[everyDB]
				}
				switch {
				case err != nil && mustRefuse:
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: %s refused it with %q, want an error containing %q", r.name, dialect, err, want)
					}
					refusals = append(refusals, fmt.Sprintf("%-34s refused: %v", r.name, err))
				case err != nil:
					t.Errorf("%s: %s refused the INSERT (%v); the test expects it to be accepted", r.name, dialect, err)
				case mustRefuse:
					t.Errorf("%s: %s accepted the INSERT; the test expects %q", r.name, dialect, want)
				case r.dead != "":
					deadRows = append(deadRows, accepted{r, id})
				default:
					oddRows = append(oddRows, accepted{r, id})
				}
			}
		}
	}
	if b < len(bad) {
		t.Fatalf("hostile case %q was never inserted", bad[b].name)
	}
	t.Logf("%s: %d hostile rows refused by the database, %d accepted (to DEAD), %d odd but deliverable", dialect, len(refusals), len(deadRows), len(oddRows))
	for _, r := range refusals {
		t.Logf("  %s", r)
	}

	// Nothing else broke: a good row inserted after all the refusals is
	// accepted and delivered too.
	lastID := txbox.NewID()
	if _, err := insert(hostileRow{eventID: lastID, aggType: "Item", aggID: "good-00", evType: "ItemAdded", payload: `{"last": true}`}); err != nil {
		t.Fatalf("a good row after the hostile ones: %v", err)
	}
	good = append(good, txbox.Event{ID: lastID, AggregateID: "good-00"})

	var logs testenv.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	r, err := relay.New(relay.Config{
		Store: s, Publisher: d.Publisher(t), Topic: broker.Topic(d.Topic),
		Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
		PollInterval: 20 * time.Millisecond, BatchSize: 64, MaxAttempts: 3,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- r.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-stopped })

	// Wait until nothing is left to deliver.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		backlog := st.Counts[txbox.StatusPending] + st.Counts[txbox.StatusRetry] + st.Counts[txbox.StatusProcessing]
		if backlog == 0 {
			break
		}
		select {
		case err := <-stopped:
			t.Fatalf("the relay stopped (err %v) with %d rows left", err, backlog)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the backlog is %d: %v", backlog, st.Counts)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Every good and odd row arrived, good rows in per-aggregate order, and
	// no DEAD row reached the broker.
	want := append([]txbox.Event(nil), good...)
	for _, o := range oddRows {
		want = append(want, txbox.Event{ID: o.id})
	}
	seen := scenario.WaitStored(t, d, want, 10*time.Second)
	pos := map[string]int{}
	for i, e := range good {
		pos[e.ID] = i
	}
	deadIDs := map[string]string{}
	for _, a := range deadRows {
		deadIDs[a.id] = a.row.name
	}
	last := map[string]int{}
	for _, m := range seen {
		if name, ok := deadIDs[m.EventID]; ok {
			t.Errorf("DEAD row %q reached the broker", name)
		}
		p, ok := pos[m.EventID]
		if !ok {
			continue
		}
		if prev, ok := last[m.AggregateID]; ok && p < prev {
			t.Fatalf("ORDER VIOLATION in aggregate %s: good row #%d after #%d", m.AggregateID, p, prev)
		}
		last[m.AggregateID] = p
	}

	// Each accepted hostile row is DEAD with a last_error naming the problem.
	for _, a := range deadRows {
		recs, err := s.List(ctx, store.Filter{EventIDs: []string{a.id}})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 {
			t.Errorf("%s: %d rows with event id %q", a.row.name, len(recs), a.id)
			continue
		}
		rec := recs[0]
		if rec.Status != txbox.StatusDead || !strings.Contains(rec.LastError, a.row.dead) {
			t.Errorf("%s: status %s, last_error %q; want DEAD naming %q", a.row.name, rec.Status, rec.LastError, a.row.dead)
		} else {
			t.Logf("  %-34s DEAD: %s", a.row.name, sqlstore.Truncate(rec.LastError, 160))
		}
	}
	for _, o := range oddRows {
		if recs, _ := s.List(ctx, store.Filter{EventIDs: []string{o.id}}); len(recs) == 1 && recs[0].Status != txbox.StatusSent {
			t.Errorf("%s: status %s (%s), want SENT", o.row.name, recs[0].Status, recs[0].LastError)
		}
	}

	// The relay is still running and never hit a store error.
	select {
	case err := <-stopped:
		t.Fatalf("the relay stopped: %v", err)
	default:
	}
	c := r.Stats()
	if n := c.Errors; n != 0 {
		t.Errorf("relay counted %d store errors", n)
	}
	if n := c.Dead; n != int64(len(deadRows)) {
		t.Errorf("relay counted %d DEAD, want %d", n, len(deadRows))
	}

	// `txbox stats` counts what the table holds.
	wantSent, wantDead := int64(len(good)+len(oddRows)), int64(len(deadRows))
	args := []string{"stats", "--json", "--db", st.URL(t, s), "--outbox-table", tb.Outbox, "--inbox-table", tb.Inbox}
	if tb.Schema != "" {
		args = append(args, "--schema", tb.Schema)
	}
	out, err := exec.Command(testenv.Binary(t), args...).Output()
	if err != nil {
		t.Fatalf("txbox stats: %v", err)
	}
	var got struct {
		Counts  map[string]int64 `json:"counts"`
		Backlog int64            `json:"backlog"`
		Dead    int64            `json:"dead"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("txbox stats --json: %v\n%s", err, out)
	}
	if got.Counts["SENT"] != wantSent || got.Counts["DEAD"] != wantDead || got.Dead != wantDead || got.Backlog != 0 {
		t.Errorf("txbox stats = %s; want SENT %d, DEAD %d, backlog 0", out, wantSent, wantDead)
	}
}

// hostileCases are the foreign rows. The aggregate is filled in with a good
// row's when a case leaves both aggregate fields empty.
func hostileCases(dupID string) []hostileRow {
	ok := `{"ok": true}`
	big := `{"blob": "` + strings.Repeat("x", 2<<20) + `"}`
	typ := "ItemAdded"
	return []hostileRow{
		// Payloads.
		{name: "empty payload", evType: typ, payload: "", refused: map[string]string{
			"postgres": "invalid input syntax for type json", "mysql": "CONSTRAINT", "sqlite": "CHECK constraint failed"}},
		{name: "NULL payload", evType: typ, payload: nil, refused: map[string]string{
			"postgres": "null value", "mysql": "cannot be null", "sqlite": "NOT NULL constraint failed"}},
		{name: "payload is not JSON", evType: typ, payload: `{"a": 1`, refused: map[string]string{
			"postgres": "invalid input syntax for type json", "mysql": "CONSTRAINT", "sqlite": "CHECK constraint failed"}},
		{name: "payload is not valid UTF-8", evType: typ, payload: "{\"a\": \"\xff\xfe\"}", refused: map[string]string{
			"postgres": "invalid byte sequence", "mysql": "Incorrect string value"}, dead: "payload is not valid UTF-8"},
		{name: "2 MB payload, over NATS max_payload", evType: typ, payload: big, dead: "max_payload"},
		{name: "payload with \\u0000 escape", evType: typ, payload: `{"a": "nul\u0000inside"}`},
		{name: "payload null", evType: typ, payload: `null`},
		{name: "payload a bare string", evType: typ, payload: `"just text"`},

		// Event types.
		{name: "empty event type", evType: "", payload: ok, dead: "empty event type"},
		{name: "10 KB event type", evType: strings.Repeat("T", 10<<10), payload: ok, refused: map[string]string{
			"postgres": "value too long", "mysql": "Data too long"}, dead: "event type longer than 128"},
		{name: "event type with a space", evType: "Item Added", payload: ok, dead: "whitespace"},
		{name: "event type with a tab", evType: "Item\tAdded", payload: ok, dead: "control character"},
		{name: "event type with wildcard *", evType: "Item.*", payload: ok, dead: "wildcard"},
		{name: "event type with wildcard >", evType: ">", payload: ok, dead: "wildcard"},
		{name: "event type with empty token", evType: "Item..Added", payload: ok, dead: "empty token"},
		{name: "event type with NUL byte", evType: "Item\x00Added", payload: ok, refused: map[string]string{
			"postgres": "invalid byte sequence"}, dead: "NUL"},
		{name: "event type not valid UTF-8", evType: "Item\xffAdded", payload: ok, refused: map[string]string{
			"postgres": "invalid byte sequence", "mysql": "Incorrect string value"}, dead: "not valid UTF-8"},

		// Ids, aggregates, versions.
		{name: "duplicate event id (first)", eventID: dupID, evType: typ, payload: ok},
		{name: "duplicate event id (second)", eventID: dupID, evType: typ, payload: ok, refused: map[string]string{
			"postgres": "duplicate key", "mysql": "Duplicate entry", "sqlite": "UNIQUE constraint failed"}},
		{name: "empty event id", emptyID: true, evType: typ, payload: ok, dead: "empty id"},
		{name: "65-character event id", eventID: strings.Repeat("e", 65), evType: typ, payload: ok, refused: map[string]string{
			"postgres": "value too long", "mysql": "Data too long"}, dead: "id longer than 64"},
		{name: "empty aggregate id", aggType: "Item", aggID: "", evType: typ, payload: ok, dead: "empty aggregate id"},
		{name: "empty aggregate type", aggType: "", aggID: "x-1", evType: typ, payload: ok, dead: "empty aggregate type"},
		{name: "aggregate id with a line break", aggType: "Item", aggID: "x\r\n1", evType: typ, payload: ok, dead: "line break"},
		{name: "aggregate id with leading space", aggType: "Item", aggID: " x-1", evType: typ, payload: ok, dead: "whitespace"},
		{name: "negative aggregate version", evType: typ, payload: ok, version: -5, dead: "negative aggregate version"},

		// Headers.
		{name: "headers not JSON", evType: typ, payload: ok, headers: `{"traceparent": `, refused: map[string]string{
			"postgres": "invalid input syntax for type json", "mysql": "CONSTRAINT", "sqlite": "CHECK constraint failed"}},
		{name: "headers a JSON array", evType: typ, payload: ok, headers: `["traceparent"]`, dead: "headers are not a JSON object of strings"},
		{name: "headers with a number value", evType: typ, payload: ok, headers: `{"retries": 3}`, dead: "headers are not a JSON object of strings"},
		{name: "headers a JSON string", evType: typ, payload: ok, headers: `"traceparent"`, dead: "headers are not a JSON object of strings"},
		{name: "header name with upper case and -", evType: typ, payload: ok, headers: `{"Trace-Id": "x"}`, dead: "not a usable CloudEvents extension name"},
		{name: "header name 21 characters", evType: typ, payload: ok, headers: `{"abcdefghijklmnopqrstu": "x"}`, dead: "not a usable CloudEvents extension name"},
		{name: "header name a core attribute", evType: typ, payload: ok, headers: `{"id": "forged"}`, dead: "not a usable CloudEvents extension name"},
		{name: "header value with a line break", evType: typ, payload: ok, headers: `{"note": "a\nb"}`, dead: "line break"},
		{name: "header value not valid UTF-8", evType: typ, payload: ok, headers: "{\"note\": \"\xff\"}", refused: map[string]string{
			"postgres": "invalid byte sequence", "mysql": "Incorrect string value"}, dead: "not valid UTF-8"},
		{name: "headers JSON null", evType: typ, payload: ok, headers: `null`},
	}
}
