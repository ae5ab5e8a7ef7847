package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// Postgres is the PostgreSQL side of a world: a server of the world's own
// (the PostgreSQL-restart fault restarts it, which the shared one must
// never be, and it runs wal_level = logical for the CDC relays whatever the
// shared one runs), or the shared one (NewPostgres), with the producers',
// the consumers' and the audit databases.
type Postgres struct {
	t       *testing.T
	PG      *testenv.PostgresServer // the world's own server, which the PostgreSQL-restart fault restarts; nil on the shared one
	Admin   *pgxpool.Pool           // its postgres database, for CREATE/DROP and backend termination
	ProdURL string                  // producers' database, direct
	ConsURL string                  // consumers' database, direct
	ProdDB  string                  // their names, for ALTER DATABASE
	ConsDB  string
	Prod    *pgxpool.Pool
	Cons    *pgxpool.Pool
	PGProxy *testenv.Proxy
	Audit   string // the audit database's URL, through AuditP
	AuditP  *testenv.Proxy
	Tables  store.Tables
	writer  *outbox.Writer
	checkerReads

	// GapIDs makes the explicit-ids fault write ids from the sequence's
	// gaps, usually below the PostgreSQL claim floor, so that an
	// aggregate's two explicit ids can straddle it (the 30-minute run found
	// them published out of order before the claim looked below the floor
	// per aggregate; RELIABILITY.md). Off, the producer's explicit ids are
	// ones it took from the sequence by hand. On by default
	// (-faults.gap-ids=false turns it off).
	GapIDs bool

	// Slot, when set (EnableCDC), makes the relays read the producers'
	// database log with `--mode cdc --slot Slot`: one reads, the other
	// waits as standby.
	Slot string
}

// NewPostgres starts the server and creates the databases, all gone when
// t ends. Without own, the databases are made on the shared server of
// TXBOX_TEST_POSTGRES instead and the world has no PostgreSQL restart (a
// run that needs neither the restart nor wal_level = logical saves the
// start of a server).
func NewPostgres(t *testing.T, own bool) *Postgres {
	t.Helper()
	ctx := context.Background()
	var pg *testenv.PostgresServer
	var base string
	if own {
		pg = testenv.StartPostgres(t)
		base = pg.URL
	} else {
		base = testenv.URL(t, "TXBOX_TEST_POSTGRES")
	}
	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	d := &Postgres{t: t, PG: pg, Admin: admin}
	id := strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	d.ProdDB, d.ConsDB = "txbox_faults_prod_"+id, "txbox_faults_cons_"+id
	auditDB, auditURL := "txbox_faults_audit_"+id, ""
	for _, db := range []struct {
		name string
		dst  *string
	}{{d.ProdDB, &d.ProdURL}, {d.ConsDB, &d.ConsURL}, {auditDB, &auditURL}} {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+db.name); err != nil {
			t.Fatal(err)
		}
		name := db.name
		t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
		v := *u
		v.Path = "/" + db.name
		*db.dst = v.String()
	}
	if d.Prod, err = pgxpool.New(ctx, d.ProdURL); err != nil {
		t.Fatal(err)
	}
	if d.Cons, err = pgxpool.New(ctx, d.ConsURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Prod.Close(); d.Cons.Close() })
	d.checkerReads = checkerReads{prod: stdlib.OpenDBFromPool(d.Prod), cons: stdlib.OpenDBFromPool(d.Cons), anyOf: func(column string, ids []string) (string, []any) {
		return column + ` = ANY($1)`, []any{ids}
	}}
	t.Cleanup(func() { d.checkerReads.prod.Close(); d.checkerReads.cons.Close() }) // before the pools
	d.Tables = store.Tables{}.WithDefaults()
	d.writer = outbox.NewWriter(postgres.Dialect{Tables: d.Tables})
	for _, p := range []*pgxpool.Pool{d.Prod, d.Cons} {
		s, err := postgres.New(p, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, ddl := range []string{`CREATE TABLE orders (id TEXT PRIMARY KEY, version BIGINT NOT NULL)`, pgLedgerDDL} {
		if _, err := d.Prod.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	// The consumers' business table: one row per consumer and applied
	// event, with the order of application, so the checker sees doubles
	// and reorders per consumer.
	if _, err := d.Cons.Exec(ctx, `CREATE TABLE effects (
		consumer TEXT NOT NULL, event_id TEXT NOT NULL, aggregate_id TEXT NOT NULL, version BIGINT NOT NULL,
		applied_seq BIGSERIAL, applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), n INT NOT NULL,
		PRIMARY KEY (consumer, event_id))`); err != nil {
		t.Fatal(err)
	}
	d.PGProxy = testenv.NewProxy(t, serverAddr(u, "5432"))
	d.AuditP = testenv.NewProxy(t, serverAddr(u, "5432"))
	audit, err := pgx.Connect(ctx, auditURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = audit.Exec(ctx, `CREATE TABLE audit (event_id TEXT PRIMARY KEY, consumer TEXT NOT NULL)`)
	audit.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	au, _ := url.Parse(auditURL)
	au.Host = d.AuditP.Addr()
	d.Audit = au.String()
	return d
}

// pgLedgerDDL is the producers' own record of what they committed: one row
// per event, written by the producer's code in the business transaction,
// in a table txbox never reads or writes. A row is there exactly when the
// transaction committed, whatever the producer saw of the COMMIT (a backend
// terminated during it, a read-only database): the checker takes
// "committed" from here, never from the outbox tables under test.
const pgLedgerDDL = `CREATE TABLE ledger (
	event_id TEXT PRIMARY KEY, aggregate_id TEXT NOT NULL, version BIGINT NOT NULL,
	committed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())`

func (d *Postgres) Kind() string               { return "postgres" }
func (d *Postgres) Proxy() *testenv.Proxy      { return d.PGProxy }
func (d *Postgres) RelayURL() string           { return d.viaProxy(d.ProdURL, "txbox-relay") }
func (d *Postgres) ConsumerURL() string        { return d.viaProxy(d.ConsURL, "txbox-consumer") }
func (d *Postgres) AuditURL() string           { return d.Audit }
func (d *Postgres) AuditProxy() *testenv.Proxy { return d.AuditP }
func (d *Postgres) RelayArgs(i int) []string {
	switch {
	case d.Slot != "":
		return []string{"--mode", "cdc", "--slot", d.Slot}
	case i == 1:
		return []string{"--claims", "lease"}
	}
	return nil
}

func (d *Postgres) Minimums() Minimums {
	m := maps.Clone(pgMinimums)
	if d.PG == nil {
		delete(m, RestartPostgres) // the shared server is not the run's to restart
	}
	return m
}

// pgMinimums are the PostgreSQL faults of a short run.
var pgMinimums = Minimums{TerminatePG: 3, TruncateOutbox: 1, ExplicitIDs: 1, ManualRetry: 1, VacuumFull: 1, ReadOnly: 1, LeaseClockJump: 1,
	RestartPostgres: 1}

// viaProxy rewrites a database URL to go through the PostgreSQL proxy and
// names the application, so backends can be told apart.
func (d *Postgres) viaProxy(raw, app string) string {
	u, _ := url.Parse(raw)
	u.Host = d.PGProxy.Addr()
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// EnableCDC prepares the producers' database for relays in --mode cdc
// (publication, slot) before anything is written; the slot is dropped
// when the test ends, after the processes are stopped (a database with a
// slot cannot be dropped).
func (d *Postgres) EnableCDC(w *World) {
	d.t.Helper()
	ctx := context.Background()
	s, err := postgres.New(d.Prod, postgres.Options{})
	if err != nil {
		d.t.Fatal(err)
	}
	if err := cdc.Migrate(ctx, s); err != nil {
		d.t.Fatal(err)
	}
	d.Slot = "faults_" + strings.ToLower(strings.TrimPrefix(d.ProdDB, "txbox_faults_prod_"))
	if _, err := cdc.CreateSlot(ctx, s, d.Slot, true); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() {
		w.stopAll()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			err := cdc.DropSlot(ctx, s, d.Slot)
			if err == nil || !errors.Is(err, cdc.ErrSlotActive) || ctx.Err() != nil {
				if err != nil {
					d.t.Errorf("replication slot %s left behind: %v", d.Slot, err)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

func (d *Postgres) Write(ctx context.Context, agg string, rollback bool) (string, error) {
	var evID string
	err := pgx.BeginFunc(ctx, d.Prod, func(tx pgx.Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, `INSERT INTO orders (id, version) VALUES ($1, 1)
			ON CONFLICT (id) DO UPDATE SET version = orders.version + 1 RETURNING version`, agg).Scan(&v); err != nil {
			return err
		}
		ev := txbox.MustEvent("Order", agg, "OrderChanged", map[string]any{"order": agg, "version": v})
		ev.AggregateVersion = v
		evID = ev.ID
		if err := pgxtx.Add(ctx, tx, d.writer, ev); err != nil {
			return err
		}
		if err := d.recordLedger(ctx, tx, ev); err != nil {
			return err
		}
		if rollback {
			return errRollback
		}
		return nil
	})
	return evID, err
}

func (d *Postgres) recordLedger(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO ledger (event_id, aggregate_id, version) VALUES ($1, $2, $3)`,
		ev.ID, ev.AggregateID, ev.AggregateVersion)
	return err
}

func (d *Postgres) Fault(ctx context.Context, f Fault, n int) (string, error) {
	switch k := f.Kind; k {
	case TerminatePG:
		var ended int
		err := d.Admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name IN ('txbox-relay', 'txbox-consumer')`).Scan(&ended)
		return fmt.Sprintf("terminated %d backends", ended), err
	case VacuumFull:
		return "", d.vacuumFull(ctx)
	case RestartPostgres:
		if d.PG == nil {
			return "", fmt.Errorf("the shared server is not the run's to restart")
		}
		return d.restart(), nil
	}
	return dataFault(ctx, d, f, n)
}

// restart restarts the world's PostgreSQL server as a crash would end it
// (immediate shutdown, crash recovery at start): every session of the
// relays, the consumers and the producers is cut, CDC's slot goes back to
// what it confirmed.
func (d *Postgres) restart() string {
	start := time.Now()
	d.PG.Crash()
	time.Sleep(time.Second)
	d.PG.Start()
	return fmt.Sprintf("down %v", time.Since(start).Round(10*time.Millisecond))
}
