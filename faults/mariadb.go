package faults

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/mysql"
)

// MariaDB is the MySQL-store side of a world: two fresh databases on the
// server of TXBOX_TEST_MYSQL (MariaDB on the project's machines), whose
// relays all claim by lease (the MySQL store has no transaction claims).
//
// The relays and the consumers connect as a user of the run's own, made
// for it, without the administrative privileges root has: the faults end
// that user's sessions only (KILL CONNECTION), and the read-only fault
// makes that user's new sessions read-only (init_connect runs for users
// without them), so that nothing else on the shared server is touched.
type MariaDB struct {
	t       *testing.T
	Root    *sql.DB // the server as root, for the faults
	ProdURL string  // the databases as root, direct
	ConsURL string
	ProdDB  string
	ConsDB  string
	Prod    *sql.DB
	Cons    *sql.DB
	User    string // the relays' and consumers' user
	MProxy  *testenv.Proxy
	AuditDB string // the consumers' audit database, through AuditP
	AuditP  *testenv.Proxy
	writer  *outbox.Writer
	checkerReads
	// GapIDs: as Postgres.GapIDs. MySQL has no claim floor; the ids still
	// lie below rows already claimed and delivered.
	GapIDs bool
}

// NewMariaDB creates the databases and the run's user, dropped when t
// ends.
func NewMariaDB(t *testing.T) *MariaDB {
	t.Helper()
	ctx := context.Background()
	base := testenv.URL(t, "TXBOX_TEST_MYSQL")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	d := &MariaDB{t: t, ProdDB: "txbox_faults_prod_" + id, ConsDB: "txbox_faults_cons_" + id, AuditDB: "txbox_faults_audit_" + id,
		User: "txboxfaults" + id}
	d.Root = d.open(base)
	for _, q := range []string{
		"CREATE DATABASE " + d.ProdDB, "CREATE DATABASE " + d.ConsDB, "CREATE DATABASE " + d.AuditDB,
		"CREATE TABLE " + d.AuditDB + ".audit (event_id VARCHAR(64) PRIMARY KEY, consumer VARCHAR(64) NOT NULL)",
		"CREATE USER '" + d.User + "'@'127.0.0.1'",
		"GRANT ALL ON " + d.ProdDB + ".* TO '" + d.User + "'@'127.0.0.1'",
		"GRANT ALL ON " + d.ConsDB + ".* TO '" + d.User + "'@'127.0.0.1'",
		"GRANT ALL ON " + d.AuditDB + ".* TO '" + d.User + "'@'127.0.0.1'",
	} {
		if _, err := d.Root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		// A read-only fault cut short leaves init_connect naming the
		// run's user: put it back.
		_, _ = d.Root.ExecContext(ctx, `SET GLOBAL init_connect = IF(@@GLOBAL.init_connect LIKE CONCAT('%', ?, '%'), '', @@GLOBAL.init_connect)`, d.User)
		_, _ = d.kill(ctx)
		for _, q := range []string{"DROP USER IF EXISTS '" + d.User + "'@'127.0.0.1'",
			"DROP DATABASE IF EXISTS " + d.ProdDB, "DROP DATABASE IF EXISTS " + d.ConsDB, "DROP DATABASE IF EXISTS " + d.AuditDB} {
			if _, err := d.Root.ExecContext(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
		d.Root.Close()
	})
	for _, db := range []struct {
		name string
		url  *string
		pool **sql.DB
	}{{d.ProdDB, &d.ProdURL, &d.Prod}, {d.ConsDB, &d.ConsURL, &d.Cons}} {
		v := *u
		v.Path = "/" + db.name
		*db.url = v.String()
		*db.pool = d.open(*db.url)
		s, err := mysql.New(*db.pool, mysql.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { d.Prod.Close(); d.Cons.Close() })
	d.checkerReads = checkerReads{prod: d.Prod, cons: d.Cons, anyOf: func(column string, ids []string) (string, []any) {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		return column + ` IN (` + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + `)`, args
	}}
	d.writer = outbox.NewWriter(mysql.Dialect{Tables: store.Tables{}.WithDefaults()})
	for _, ddl := range []string{
		`CREATE TABLE orders (id VARCHAR(128) PRIMARY KEY, version BIGINT NOT NULL)`,
		// The producers' ledger, as on PostgreSQL (pgLedgerDDL).
		`CREATE TABLE ledger (event_id VARCHAR(64) PRIMARY KEY, aggregate_id VARCHAR(128) NOT NULL, version BIGINT NOT NULL,
			committed_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)))`,
	} {
		if _, err := d.Prod.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Cons.ExecContext(ctx, `CREATE TABLE effects (
		consumer VARCHAR(64) NOT NULL, event_id VARCHAR(64) NOT NULL, aggregate_id VARCHAR(128) NOT NULL, version BIGINT NOT NULL,
		applied_seq BIGINT NOT NULL AUTO_INCREMENT, applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), n INT NOT NULL,
		PRIMARY KEY (consumer, event_id), UNIQUE KEY (applied_seq))`); err != nil {
		t.Fatal(err)
	}
	d.MProxy = testenv.NewProxy(t, serverAddr(u, "3306"))
	d.AuditP = testenv.NewProxy(t, serverAddr(u, "3306"))
	return d
}

func (d *MariaDB) open(raw string) *sql.DB {
	d.t.Helper()
	dsn, err := mysql.DSN(raw)
	if err != nil {
		d.t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		d.t.Fatal(err)
	}
	return db
}

func (d *MariaDB) Kind() string           { return "mysql" }
func (d *MariaDB) Proxy() *testenv.Proxy  { return d.MProxy }
func (d *MariaDB) RelayURL() string       { return d.viaProxy(d.ProdDB) }
func (d *MariaDB) ConsumerURL() string    { return d.viaProxy(d.ConsDB) }
func (d *MariaDB) RelayArgs(int) []string { return nil }
func (d *MariaDB) Minimums() Minimums     { return mariaMinimums }
func (d *MariaDB) viaProxy(db string) string {
	return "mysql://" + d.User + "@" + d.MProxy.Addr() + "/" + db
}

func (d *MariaDB) AuditProxy() *testenv.Proxy { return d.AuditP }
func (d *MariaDB) AuditURL() string {
	return "mysql://" + d.User + "@" + d.AuditP.Addr() + "/" + d.AuditDB
}

// mariaMinimums are the MariaDB faults of a short run: PostgreSQL's, with
// KILL CONNECTION for pg_terminate_backend and OPTIMIZE TABLE (a table
// rebuild) for VACUUM FULL. There is no server restart: the server is the
// machine's, shared with every other test, and the harness has no MariaDB
// of its own to restart (PostgreSQL's is started by testenv).
var mariaMinimums = Minimums{KillConnection: 3, TruncateOutbox: 1, ExplicitIDs: 1, ManualRetry: 1, OptimizeTable: 1, ReadOnly: 1, LeaseClockJump: 1}

func (d *MariaDB) Write(ctx context.Context, agg string, rollback bool) (string, error) {
	tx, err := d.Prod.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, version) VALUES (?, 1) ON DUPLICATE KEY UPDATE version = version + 1`, agg); err != nil {
		return "", err
	}
	var v int64
	if err := tx.QueryRowContext(ctx, `SELECT version FROM orders WHERE id = ?`, agg).Scan(&v); err != nil {
		return "", err
	}
	ev := txbox.MustEvent("Order", agg, "OrderChanged", map[string]any{"order": agg, "version": v})
	ev.AggregateVersion = v
	if err := d.writer.AddSQL(ctx, tx, ev); err != nil {
		return ev.ID, err
	}
	if err := recordLedgerSQL(ctx, tx, ev); err != nil {
		return ev.ID, err
	}
	if rollback {
		return ev.ID, errRollback
	}
	return ev.ID, tx.Commit()
}

func recordLedgerSQL(ctx context.Context, tx *sql.Tx, ev txbox.Event) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO ledger (event_id, aggregate_id, version) VALUES (?, ?, ?)`,
		ev.ID, ev.AggregateID, ev.AggregateVersion)
	return err
}

func (d *MariaDB) Fault(ctx context.Context, f Fault, n int) (string, error) {
	switch k := f.Kind; k {
	case KillConnection:
		ended, err := d.kill(ctx)
		return fmt.Sprintf("killed %d connections", ended), err
	case OptimizeTable:
		return d.optimize(ctx)
	}
	return dataFault(ctx, d, f, n)
}

// kill ends every session of the relays' and consumers' user, as
// pg_terminate_backend does on PostgreSQL.
func (d *MariaDB) kill(ctx context.Context) (int, error) {
	var ids []int64
	err := each(ctx, d.Root, `SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?`, func(r *sql.Rows) error {
		var id int64
		err := r.Scan(&id)
		ids = append(ids, id)
		return err
	}, d.User)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		_, err := d.Root.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		var me *mysqldrv.MySQLError
		switch {
		case err == nil:
			n++
		case errors.As(err, &me) && me.Number == 1094: // unknown thread: it ended meanwhile
		default:
			return n, err
		}
	}
	return n, nil
}

// truncateKeeping is the operators' clean-up, as on PostgreSQL: the
// undelivered rows are kept, the table is emptied (TRUNCATE sets
// AUTO_INCREMENT back to 1) and the kept rows go back in their order
// with new ids from 1; rows a relay holds go back PENDING, their lease
// void. TRUNCATE is DDL and commits, so the table is locked for the whole
// of it (LOCK TABLES, on a connection of its own): no producer's row can
// fall between the copy and the truncation.
func (d *MariaDB) truncateKeeping(ctx context.Context) (string, error) {
	conn, err := d.Prod.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var kept int64
	for _, q := range []string{
		`SET SESSION lock_wait_timeout = 10`,
		`LOCK TABLES outbox_event WRITE`,
		`CREATE TEMPORARY TABLE faults_keep AS SELECT * FROM outbox_event WHERE status <> 'SENT'`,
		`TRUNCATE TABLE outbox_event`,
		`INSERT INTO outbox_event (id, event_id, aggregate_type, aggregate_id, aggregate_version,
				event_type, payload, headers, status, retry_count, next_retry_at, occurred_at, created_at, last_error)
			SELECT ROW_NUMBER() OVER (ORDER BY id), event_id, aggregate_type, aggregate_id, aggregate_version,
				event_type, payload, headers, CASE WHEN status = 'PROCESSING' THEN 'PENDING' ELSE status END,
				retry_count, next_retry_at, occurred_at, created_at, last_error
			FROM faults_keep ORDER BY id`,
		`UNLOCK TABLES`,
		`DROP TEMPORARY TABLE faults_keep`,
	} {
		res, err := conn.ExecContext(ctx, q)
		if err != nil {
			_, _ = conn.ExecContext(context.Background(), `UNLOCK TABLES`)
			// The connection holds the temporary table: it must not go back
			// to the pool.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			return "", fmt.Errorf("%s: %w", strings.Fields(q)[0], err)
		}
		if strings.HasPrefix(q, "INSERT") {
			kept, _ = res.RowsAffected()
		}
	}
	return fmt.Sprintf("kept %d undelivered rows", kept), nil
}

// explicitIDs is a producer writing its own outbox ids, as on PostgreSQL:
// two events of a new aggregate in one transaction, with ids that
// AUTO_INCREMENT handed out earlier to transactions that rolled back (it
// never hands them out again), 200 to 2,200 below the next one; where
// fewer than two such gaps are free, the rest take their id from
// AUTO_INCREMENT. With GapIDs off both do.
func (d *MariaDB) explicitIDs(ctx context.Context, n int) (string, error) {
	agg := fmt.Sprintf("explicit-%d", n)
	tx, err := d.Prod.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback() }()
	var gaps []int64
	if d.GapIDs {
		var next sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT AUTO_INCREMENT FROM information_schema.TABLES
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_event'`).Scan(&next); err != nil {
			return "", err
		}
		hi := next.Int64 - 200
		lo := max(hi-2000, 1)
		used := map[int64]bool{}
		err := each(ctx, tx, `SELECT id FROM outbox_event WHERE id BETWEEN ? AND ? UNION SELECT id FROM outbox_event_sent WHERE id BETWEEN ? AND ?`,
			func(r *sql.Rows) error {
				var id int64
				err := r.Scan(&id)
				used[id] = true
				return err
			}, lo, hi, lo, hi)
		if err != nil {
			return "", err
		}
		for id := lo; id <= hi && len(gaps) < 2; id++ {
			if !used[id] {
				gaps = append(gaps, id)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, version) VALUES (?, 2)`, agg); err != nil {
		return "", err
	}
	var ids []int64
	for i := range 2 {
		ev := txbox.MustEvent("Order", agg, "OrderChanged", map[string]any{"order": agg, "version": i + 1})
		ev.AggregateVersion = int64(i + 1)
		var id any // nil: AUTO_INCREMENT's
		if i < len(gaps) {
			id = gaps[i]
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO outbox_event (id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, id, ev.ID, ev.AggregateType, ev.AggregateID, ev.AggregateVersion, ev.Type, string(ev.Payload))
		if err != nil {
			return "", err
		}
		got, _ := res.LastInsertId()
		ids = append(ids, got)
		if err := recordLedgerSQL(ctx, tx, ev); err != nil {
			return "", err
		}
	}
	if err := tx.Commit(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s at ids %v (%d from gaps)", agg, ids, len(gaps)), nil
}

// manualRetry sets up to 20 unsent rows to RETRY by hand, as on
// PostgreSQL; rows a claim is changing are left alone (SKIP LOCKED), and a
// leased row loses its lease.
func (d *MariaDB) manualRetry(ctx context.Context) (string, error) {
	var n int64
	err := d.locked(ctx, `SELECT id FROM outbox_event WHERE status IN ('PENDING', 'PROCESSING') ORDER BY id LIMIT 20 FOR UPDATE SKIP LOCKED`,
		func(tx *sql.Tx, in string, args []any) error {
			res, err := tx.ExecContext(ctx, `UPDATE outbox_event SET status = 'RETRY', next_retry_at = UTC_TIMESTAMP(6) + INTERVAL 500000 MICROSECOND,
				retry_count = retry_count + 1, locked_by = NULL, locked_until = NULL, last_error = 'set to RETRY by hand (faults)'
				WHERE id IN (`+in+`)`, args...)
			if err == nil {
				n, _ = res.RowsAffected()
			}
			return err
		})
	return fmt.Sprintf("%d rows", n), err
}

// locked runs change on the ids sel locks, in one transaction; change gets
// them as placeholders and arguments. No ids: nothing runs.
func (d *MariaDB) locked(ctx context.Context, sel string, change func(tx *sql.Tx, in string, args []any) error) error {
	tx, err := d.Prod.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var args []any
	if err := each(ctx, tx, sel, func(r *sql.Rows) error {
		var id int64
		err := r.Scan(&id)
		args = append(args, id)
		return err
	}); err != nil {
		return err
	}
	if len(args) == 0 {
		return nil
	}
	if err := change(tx, strings.TrimSuffix(strings.Repeat("?,", len(args)), ","), args); err != nil {
		return err
	}
	return tx.Commit()
}

// optimize rebuilds the outbox and its archive under the running relays
// (InnoDB's OPTIMIZE TABLE is a table copy, online, with short exclusive
// metadata locks at its start and end): MariaDB's VACUUM FULL.
func (d *MariaDB) optimize(ctx context.Context) (string, error) {
	// A session of its own whose lock waits are short: a wait that times
	// out is tried again (dbFault) instead of holding the schedule for
	// innodb_lock_wait_timeout's 50 s.
	conn, err := d.Prod.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET SESSION innodb_lock_wait_timeout = 10, lock_wait_timeout = 10`); err != nil {
		return "", err
	}
	var notes []string
	err = each(ctx, conn, `OPTIMIZE TABLE outbox_event, outbox_event_sent`, func(r *sql.Rows) error {
		var tbl, op, typ, text string
		if err := r.Scan(&tbl, &op, &typ, &text); err != nil {
			return err
		}
		if typ == "error" {
			return fmt.Errorf("%s: %s", tbl, text)
		}
		notes = append(notes, typ+": "+text)
		return nil
	})
	if err != nil && contended(err) {
		err = fmt.Errorf("%w (open transactions then: %s)", err, d.openTransactions(ctx))
	}
	return strings.Join(notes, "; "), err
}

// openTransactions lists the sessions with a transaction open on the
// server, longest first: what a DDL statement's lock wait waited for.
func (d *MariaDB) openTransactions(ctx context.Context) string {
	var out []string
	err := each(ctx, d.Root, `SELECT p.id, p.user, coalesce(p.db, ''), p.command, p.time, coalesce(p.state, ''),
			TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), left(coalesce(p.info, ''), 80)
		FROM information_schema.innodb_trx t JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
		ORDER BY t.trx_started LIMIT 8`, func(r *sql.Rows) error {
		var id, secs, open int64
		var user, db, cmd, state, info string
		if err := r.Scan(&id, &user, &db, &cmd, &secs, &state, &open, &info); err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("#%d %s@%s %s %ds state=%q open %ds: %q", id, user, db, cmd, secs, state, open, info))
		return nil
	})
	if err != nil {
		return "unknown: " + err.Error()
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// readOnly makes the relays' and consumers' sessions read-only for dur,
// as a failover to a replica does: init_connect, which the server runs at
// the start of every session of a user without administrative privileges,
// makes the run's user's sessions read-only (tx_read_only; writes then fail
// with ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION, SQLSTATE 25006, as on
// PostgreSQL); its sessions are ended so that they reconnect into it; after
// dur init_connect is put back and the sessions begun meanwhile are ended.
// Other users' sessions, root's included, are not changed; the handlers'
// audit database, reached as the same user, turns read-only too.
func (d *MariaDB) readOnly(ctx context.Context, dur time.Duration) (string, error) {
	var old string
	if err := d.Root.QueryRowContext(ctx, `SELECT @@GLOBAL.init_connect`).Scan(&old); err != nil {
		return "", err
	}
	ro := fmt.Sprintf("SET SESSION tx_read_only = IF(CURRENT_USER() = '%s@127.0.0.1', 1, @@SESSION.tx_read_only)", d.User)
	if old != "" {
		return "", fmt.Errorf("init_connect is set already (%q): not the run's to change", old)
	}
	if _, err := d.Root.ExecContext(ctx, `SET GLOBAL init_connect = ?`, ro); err != nil {
		return "", err
	}
	n1, err := d.kill(ctx)
	time.Sleep(dur)
	if _, rerr := d.Root.ExecContext(context.Background(), `SET GLOBAL init_connect = ''`); rerr != nil {
		return "", rerr
	}
	n2, err2 := d.kill(ctx)
	if err == nil {
		err = err2
	}
	return fmt.Sprintf("ended %d sessions, then %d begun read-only", n1, n2), err
}

// leaseClockJump is as on PostgreSQL: the MySQL store's leases run on the
// server's clock (UTC_TIMESTAMP), so the held leases and the retry times
// are moved back by jump, every 10 ms for 3 s; rows a claim or a mark is
// changing are left for the next jump (SKIP LOCKED).
func (d *MariaDB) leaseClockJump(ctx context.Context, jump time.Duration) (string, error) {
	var leases, retries int64
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		err := d.locked(ctx, `SELECT id FROM outbox_event WHERE status IN ('PROCESSING', 'RETRY') ORDER BY id FOR UPDATE SKIP LOCKED`,
			func(tx *sql.Tx, in string, args []any) error {
				var l, r int64
				if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(status = 'PROCESSING'), 0), COALESCE(SUM(status = 'RETRY'), 0)
					FROM outbox_event WHERE id IN (`+in+`)`, args...).Scan(&l, &r); err != nil {
					return err
				}
				leases, retries = leases+l, retries+r
				_, err := tx.ExecContext(ctx, `UPDATE outbox_event SET
					locked_until = locked_until - INTERVAL ? MICROSECOND, next_retry_at = next_retry_at - INTERVAL ? MICROSECOND
					WHERE id IN (`+in+`)`, append([]any{jump.Microseconds(), jump.Microseconds()}, args...)...)
				return err
			})
		if err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("jumped %v every 10ms for 3s: %d held leases and %d retry times moved", jump, leases, retries), nil
}

// holdTransaction holds a transaction WITH CONSISTENT SNAPSHOT open on the
// producers' database for dur, reading the outbox as a report does: its
// read view holds back InnoDB's purge while the relays claim, archive and
// delete. As root: the read-only database fault does not touch it.
func (d *MariaDB) holdTransaction(ctx context.Context, dur time.Duration) (string, error) {
	c, err := d.Prod.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `START TRANSACTION WITH CONSISTENT SNAPSHOT`); err != nil {
		return "", err
	}
	defer c.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
	var rows int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM outbox_event`).Scan(&rows); err != nil {
		return "", err
	}
	time.Sleep(dur)
	var history int64
	_ = d.Root.QueryRowContext(ctx, `SELECT count FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'`).Scan(&history)
	return fmt.Sprintf("a read view over %d outbox rows held %v; history list %d at its end", rows, dur, history), nil
}
