package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/promtest"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/telemetry/prom"
)

// outageWorld is a consumer on a real store whose handler writes its
// effect through the inbox transaction, counting applications per event.
type outageWorld struct {
	t       *testing.T
	s       store.Store
	db      *sql.DB
	is      store.InboxStore[*sql.Tx]
	effects *storeenv.Effects
	b       *membroker.Broker
	logs    *testenv.SyncBuffer
	reg     *prometheus.Registry
	c       *inbox.Consumer
}

func newOutageWorld(t *testing.T, h harness) *outageWorld {
	t.Helper()
	s, db := openInboxStore(t, h)
	return &outageWorld{t: t, s: s, db: db, is: storeOrSQL(t, s, db), effects: storeenv.NewEffects(t, s, db), b: membroker.New(membroker.Options{}),
		logs: &testenv.SyncBuffer{}, reg: prometheus.NewRegistry()}
}

// start runs a consumer with MaxAttempts 2 and a 50..200ms back-off until
// the test ends.
func (w *outageWorld) start(txBatch int, h func(ctx context.Context, tx *sql.Tx, ev txbox.Event) error) {
	w.t.Helper()
	c, err := inbox.New(w.is, inbox.Config{Name: "outage", Subscriber: w.b.Subscribe("outage"), MaxAttempts: 2, TxBatch: txBatch,
		BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, ReplayInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(w.logs, nil)), Metrics: prom.NewInboxMetrics(w.reg)}, h)
	if err != nil {
		w.t.Fatal(err)
	}
	w.c = c
	testenv.Go(w.t, c.Run)
}

func (w *outageWorld) apply(ctx context.Context, tx *sql.Tx, ev txbox.Event) error {
	_, err := tx.ExecContext(ctx, w.effects.Upsert, ev.ID)
	return err
}

// publish sends n events, each of an aggregate of its own so that none
// waits behind another.
func (w *outageWorld) publish(n int) []txbox.Event {
	w.t.Helper()
	evs := make([]txbox.Event, n)
	msgs := make([]broker.Message, n)
	for i := range evs {
		evs[i] = txbox.MustEvent("Order", "o-"+txbox.NewID(), "OrderCreated", map[string]int{"i": i})
		msgs[i] = broker.Message{Event: evs[i], Topic: "orders"}
	}
	for i, err := range w.b.Publish(context.Background(), msgs) {
		if err != nil {
			w.t.Fatalf("publish %d: %v", i, err)
		}
	}
	return evs
}

func (w *outageWorld) counts() map[string]int {
	w.t.Helper()
	return w.effects.Counts(w.t)
}

func (w *outageWorld) row(id string) store.InboxRow {
	w.t.Helper()
	rows, err := w.is.InboxList(context.Background(), store.InboxFilter{Consumer: "outage", EventIDs: []string{id}})
	if err != nil || len(rows) != 1 {
		w.t.Fatalf("inbox row of %s: %v, %d rows", id, err, len(rows))
	}
	return rows[0]
}

// databaseUp reads txbox_inbox_database_up from the consumer's registry.
func (w *outageWorld) databaseUp() float64 {
	w.t.Helper()
	return promtest.Value(w.t, w.reg, "txbox_inbox_database_up")
}

// logLines counts the log lines whose message is msg.
func (w *outageWorld) logLines(msg string) int {
	return strings.Count(w.logs.String(), `msg="`+msg)
}

// checkApplied: every event applied exactly once, processed with no attempt
// spent, nothing parked.
func (w *outageWorld) checkApplied(evs []txbox.Event) {
	w.t.Helper()
	got := w.counts()
	for _, ev := range evs {
		if got[ev.ID] != 1 {
			w.t.Errorf("event %s applied %d times", ev.ID, got[ev.ID])
		}
		if r := w.row(ev.ID); r.Status != txbox.StatusProcessed || r.RetryCount != 0 {
			w.t.Errorf("event %s: status %s, retry_count %d (%q); want PROCESSED with no attempt spent", ev.ID, r.Status, r.RetryCount, r.ErrorMessage)
		}
	}
	if st := w.c.Stats(); st.Parked != 0 || st.Failed != 0 {
		w.t.Errorf("parked %d, failed attempts %d: an outage spends none", st.Parked, st.Failed)
	}
}

// downstream is a database of the handler's own, beside the inbox's, that
// an outage takes away.
type downstream struct {
	db       *sql.DB
	insert   string // idempotent write of an event id
	down, up func()
}

// The handler needs a second database; it goes read-only or away for longer
// than the retry schedule (MaxAttempts 2), while events keep coming. The
// driver's error comes back from the handler as it is: the store's
// classifier must recognise it. Every event is applied exactly once once
// the database is back, nothing is parked, no attempt is recorded, and the
// outage is logged once when it starts and once when it ends.
func TestHandlerDatabaseOutagePostgres(t *testing.T) {
	handlerDatabaseOutage(t, storeenv.Postgres{}, postgresReadOnly)
}
func TestHandlerDatabaseOutageMariaDB(t *testing.T) {
	handlerDatabaseOutage(t, storeenv.MySQL{}, mysqlBehindProxy)
}
func TestHandlerDatabaseOutageSQLite(t *testing.T) {
	handlerDatabaseOutage(t, storeenv.SQLite{}, sqliteQueryOnly)
}

func handlerDatabaseOutage(t *testing.T, h harness, open func(t *testing.T, w *outageWorld) downstream) {
	w := newOutageWorld(t, h)
	d := open(t, w)
	w.start(1, func(ctx context.Context, tx *sql.Tx, ev txbox.Event) error {
		if _, err := d.db.ExecContext(ctx, d.insert, ev.ID); err != nil {
			return err
		}
		return w.apply(ctx, tx, ev)
	})
	before := w.publish(5)
	testenv.WaitFor(t, 15*time.Second, "the first events", func() bool { return w.c.Stats().Processed == 5 })
	if w.databaseUp() != 1 {
		t.Fatal("txbox_inbox_database_up is not 1 before the outage")
	}

	d.down()
	during := w.publish(15)
	// Until every event met the outage more often than its attempts allow,
	// or an attempt was spent on it (the failure the test is about).
	const maxAttempts = 2
	testenv.WaitFor(t, 30*time.Second, "deliveries sent back past the attempts", func() bool {
		st := w.c.Stats()
		return st.OutageWaits >= int64(len(during)*(maxAttempts+2)) || st.Failed > 0
	})
	if st := w.c.Stats(); st.Failed > 0 {
		testenv.WaitFor(t, time.Minute, "the outage to park the events", func() bool { return w.c.Stats().Parked == int64(len(during)) })
		t.Fatalf("the outage spent attempts: %d failed, %d of %d events parked", st.Failed, w.c.Stats().Parked, len(during))
	}
	if up := w.databaseUp(); up != 0 {
		t.Errorf("txbox_inbox_database_up = %v during the outage", up)
	}
	if p := w.c.Stats().Processed; p != 5 {
		t.Fatalf("%d processed while the handler's database was down", p)
	}
	d.up()

	testenv.WaitFor(t, 30*time.Second, "every event after the outage", func() bool { return w.c.Stats().Processed == 20 })
	w.checkApplied(append(before, during...))
	if up := w.databaseUp(); up != 1 {
		t.Errorf("txbox_inbox_database_up = %v after the outage", up)
	}
	if s, e := w.logLines("outage: "), w.logLines("outage over"); s != 1 || e != 1 {
		t.Errorf("%d outage start lines and %d end lines, want one each:\n%s", s, e, w.logs.String())
	}
	if !strings.Contains(w.logs.String(), "deliveries_waited=") {
		t.Errorf("the end of the outage does not say how many deliveries waited:\n%s", w.logs.String())
	}
	t.Logf("%d deliveries waited\n%s\n%s", w.c.Stats().OutageWaits, lastLine(w.logs.String(), "outage: "), lastLine(w.logs.String(), "outage over"))
}

func lastLine(s, sub string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return lines[i]
		}
	}
	return ""
}

// postgresReadOnly: a database of the test's own that goes read-only, as a
// primary demoted by a failover does: default_transaction_read_only set
// and its sessions terminated. The pool keeps no idle connection, so that
// a session begun read-only is not kept past the outage.
func postgresReadOnly(t *testing.T, w *outageWorld) downstream {
	name := "txbox_down_" + strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	admin := w.db
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`) })
	u, err := url.Parse(testenv.URL(t, "TXBOX_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxIdleConns(0)
	if _, err := db.Exec(`CREATE TABLE down (event_id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	exec := func(q string) {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return downstream{db: db, insert: `INSERT INTO down (event_id) VALUES ($1) ON CONFLICT DO NOTHING`,
		down: func() {
			exec(`ALTER DATABASE ` + name + ` SET default_transaction_read_only = on`)
			exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + name + `'`)
		},
		up: func() { exec(`ALTER DATABASE ` + name + ` RESET default_transaction_read_only`) },
	}
}

// mysqlBehindProxy: the handler reaches its database through a TCP proxy
// that the outage cuts (connections closed, new ones dropped).
func mysqlBehindProxy(t *testing.T, w *outageWorld) downstream {
	u, err := url.Parse(testenv.URL(t, "TXBOX_TEST_MYSQL"))
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, u.Host)
	cfg := mysqldrv.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", p.Addr(), strings.TrimPrefix(u.Path, "/")
	cfg.Timeout = 2 * time.Second
	cfg.Logger = log.New(io.Discard, "", 0) // not a line per connection the cut breaks
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	table := "down_" + w.s.Tables().Outbox
	if _, err := db.Exec(`CREATE TABLE ` + table + ` (event_id VARCHAR(64) NOT NULL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = w.db.Exec(`DROP TABLE IF EXISTS ` + table) })
	return downstream{db: db, insert: `INSERT IGNORE INTO ` + table + ` (event_id) VALUES (?)`, down: p.Cut, up: p.Restore}
}

// sqliteQueryOnly: a second SQLite file that maintenance makes read-only
// for a while (PRAGMA query_only on the pool's one connection).
func sqliteQueryOnly(t *testing.T, w *outageWorld) downstream {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "down.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	if _, err := db.Exec(`CREATE TABLE down (event_id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	pragma := func(on string) func() {
		return func() {
			if _, err := db.Exec(`PRAGMA query_only = ` + on); err != nil {
				t.Fatal(err)
			}
		}
	}
	return downstream{db: db, insert: `INSERT OR IGNORE INTO down (event_id) VALUES (?)`, down: pragma("ON"), up: pragma("OFF")}
}

// A handler that says its own database is down
// (txbox.DatabaseUnavailable) more often than MaxAttempts, then succeeds:
// applied once, never parked, no attempt recorded. Beside it an event
// whose handler fails for a reason of its own is parked after MaxAttempts,
// as always, and a good one is applied; with one transaction per event and
// with a shared one.
func TestHandlerReportsDatabaseUnavailablePostgres(t *testing.T) {
	handlerReportsUnavailable(t, storeenv.Postgres{})
}
func TestHandlerReportsDatabaseUnavailableMariaDB(t *testing.T) {
	handlerReportsUnavailable(t, storeenv.MySQL{})
}
func TestHandlerReportsDatabaseUnavailableSQLite(t *testing.T) {
	handlerReportsUnavailable(t, storeenv.SQLite{})
}

func handlerReportsUnavailable(t *testing.T, h harness) {
	for _, txBatch := range []int{1, 10} {
		t.Run(fmt.Sprintf("TxBatch%d", txBatch), func(t *testing.T) {
			w := newOutageWorld(t, h)
			evs := w.publish(3)
			flaky, poison, good := evs[0], evs[1], evs[2]
			const downFor = 5 // > MaxAttempts (2)
			var calls atomic.Int32
			w.start(txBatch, func(ctx context.Context, tx *sql.Tx, ev txbox.Event) error {
				if err := w.apply(ctx, tx, ev); err != nil { // rolled back when the handler fails
					return err
				}
				switch ev.ID {
				case flaky.ID:
					if calls.Add(1) <= downFor {
						return txbox.DatabaseUnavailable(errors.New("downstream down"))
					}
				case poison.ID:
					return errors.New("unknown sku")
				}
				return nil
			})
			testenv.WaitFor(t, 20*time.Second, "every event applied or parked", func() bool {
				st := w.c.Stats()
				return st.Processed+st.Parked == 3
			})
			got := w.counts()
			if got[flaky.ID] != 1 || got[good.ID] != 1 || got[poison.ID] != 0 {
				t.Fatalf("applied: flaky %d, good %d, poison %d; want 1, 1, 0", got[flaky.ID], got[good.ID], got[poison.ID])
			}
			if r := w.row(flaky.ID); r.Status != txbox.StatusProcessed || r.RetryCount != 0 {
				t.Errorf("flaky: status %s, retry_count %d (%q); want PROCESSED, 0", r.Status, r.RetryCount, r.ErrorMessage)
			}
			if r := w.row(poison.ID); r.Status != txbox.StatusDead || r.RetryCount != 2 || r.ErrorMessage != "unknown sku" {
				t.Errorf("poison: status %s, retry_count %d (%q); want DEAD after 2 attempts", r.Status, r.RetryCount, r.ErrorMessage)
			}
			st := w.c.Stats()
			if n := calls.Load(); n != downFor+1 {
				t.Errorf("flaky's handler ran %d times, want %d", n, downFor+1)
			}
			if st.OutageWaits != downFor || st.Failed != 2 {
				t.Errorf("outage waits %d, failed attempts %d; want %d and 2", st.OutageWaits, st.Failed, downFor)
			}
			if s, e := w.logLines("outage: "), w.logLines("outage over"); s != 1 || e != 1 {
				t.Errorf("%d outage start lines and %d end lines, want one each:\n%s", s, e, w.logs.String())
			}
		})
	}
}

// countingInbox counts the inbox transactions begun.
type countingInbox struct {
	store.InboxStore[*sql.Tx]
	mu     sync.Mutex
	begins int
}

func (c *countingInbox) BeginInbox(ctx context.Context, shared bool) (store.InboxTx[*sql.Tx], error) {
	c.mu.Lock()
	c.begins++
	c.mu.Unlock()
	return c.InboxStore.BeginInbox(ctx, shared)
}

func (c *countingInbox) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.begins
}

// The consumer's own database goes away (its connections cut at a proxy):
// the inbox's own statements fail, which records no attempt, and the
// outage is tracked as a handler's is (one line when it starts, one when
// it ends, the gauge); once a delivery found the database down the rest
// of its receive is sent back untried instead of each one trying again.
func TestConsumerDatabaseOutagePostgres(t *testing.T) {
	ctx := context.Background()
	raw := testenv.URL(t, "TXBOX_TEST_POSTGRES")
	purl, p := testenv.ProxyURL(t, raw)
	tables := storeenv.Fresh()
	s, err := postgres.Open(ctx, purl, postgres.Options{Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	direct := storeenv.OpenPostgres(t, postgres.Options{}) // drops the tables; the proxy is cut when t ends
	t.Cleanup(func() {
		s.Close()
		for _, tb := range storeenv.Owned(tables) {
			_, _ = direct.Pool().Exec(context.Background(), `DROP TABLE IF EXISTS `+tb)
		}
	})
	storeenv.Migrated(t, s)
	db := stdlib.OpenDBFromPool(s.Pool())
	t.Cleanup(func() { db.Close() })
	// The effects table is reached directly too, so that it is dropped
	// (and read) whatever the proxy's state.
	w := &outageWorld{t: t, s: s, db: db, effects: storeenv.NewEffects(t, s, storeenv.Postgres{}.SQLDB(t, direct)), b: membroker.New(membroker.Options{}), logs: &testenv.SyncBuffer{}, reg: prometheus.NewRegistry()}
	ci := &countingInbox{InboxStore: sqlInbox(t, s, db)}
	w.is = ci
	w.start(1, w.apply)

	before := w.publish(5)
	testenv.WaitFor(t, 15*time.Second, "the first events", func() bool { return w.c.Stats().Processed == 5 })
	p.Cut()
	begins := ci.count()
	during := w.publish(15)
	testenv.WaitFor(t, 30*time.Second, "deliveries sent back", func() bool {
		return w.c.Stats().OutageWaits >= int64(len(during)*4) || w.logLines("begin failed") > 0
	})
	if n := w.logLines("begin failed"); n > 0 {
		t.Errorf("the outage was not recognised: %d deliveries logged %q", n, "begin failed")
	}
	if up := w.databaseUp(); up != 0 {
		t.Errorf("txbox_inbox_database_up = %v during the outage", up)
	}
	tried, waited := ci.count()-begins, w.c.Stats().OutageWaits
	p.Restore()
	testenv.WaitFor(t, 30*time.Second, "every event after the outage", func() bool { return w.c.Stats().Processed == 20 })
	w.checkApplied(append(before, during...))
	if tried*3 > int(waited) {
		t.Errorf("%d transactions begun for %d deliveries sent back: the rest of a receive should go back untried", tried, waited)
	}
	if s, e := w.logLines("outage: "), w.logLines("outage over"); s != 1 || e != 1 {
		t.Errorf("%d outage start lines and %d end lines, want one each:\n%s", s, e, w.logs.String())
	}
	if up := w.databaseUp(); up != 1 {
		t.Errorf("txbox_inbox_database_up = %v after the outage", up)
	}
	t.Logf("%d transactions tried for %d deliveries sent back; %s", tried, waited, lastLine(w.logs.String(), "outage over"))
}
