// Package mysql is the MySQL / MariaDB store, on github.com/go-sql-driver/mysql.
// Supported servers: MySQL 8.0.13+ and MariaDB 10.6+. SKIP LOCKED arrived in
// MySQL 8.0.1 and MariaDB 10.6; the column default DEFAULT (UTC_TIMESTAMP(6))
// needs MySQL 8.0.13; MySQL enforces the JSON CHECK constraints from 8.0.16
// (before, invalid JSON is caught only by Record.Event, which sends the row to
// DEAD). Claims run at READ COMMITTED, which with binary logging on needs
// binlog_format ROW or MIXED (the defaults). Tested on MariaDB 10.11.
//
// What it guarantees, and why:
//
//   - Delivered rows leave the hot table. MySQL has no partial indexes, and an
//     index on status decays as SENT rows pile up until the optimizer stops
//     using it (seed 003). So MarkSent moves each confirmed row, in the same
//     transaction, into an archive table <outbox>_sent (INSERT ... SELECT,
//     then DELETE), or deletes it outright with Options.DeleteSent. The hot
//     table holds only unsent and DEAD rows, and a stored generated column
//     unsent = status IN (PENDING, RETRY, PROCESSING) leads the claim's
//     indexes, so even many DEAD rows cost the claim nothing. Stats and List
//     read both tables (SENT rows are in the archive); Cleanup deletes
//     archived rows older than the given age in batches. Replay and Purge
//     concern DEAD rows, which never leave the hot table.
//   - A claim is one READ COMMITTED transaction:
//     heads: SELECT ... FOR UPDATE SKIP LOCKED of the first unsent row of each
//     aggregate, if deliverable (so concurrent relays split the aggregates
//     between them and never wait for each other);
//     runs: the following unsent rows of those aggregates, at most 64 each;
//     the lowest Limit ids of the deliverable prefixes are then locked with
//     FOR UPDATE SKIP LOCKED and re-checked (a row that is gone, changed or
//     locked ends its aggregate's run there, so order cannot break), marked
//     PROCESSING with locked_by = lease, and the transaction commits.
//     The runs come from the id range the heads scan has just read when the
//     heads alone fill Limit, else from one bounded SELECT per head (MariaDB
//     has no LATERAL). READ COMMITTED matters: under REPEATABLE READ a
//     locking scan also takes gap locks, which would block producers'
//     INSERTs until the claim ends.
//   - Every mark is fenced (locked_by = lease AND status = PROCESSING) and
//     reports how many rows it changed. Transactions that InnoDB picks as a
//     deadlock victim are retried a few times.
//   - Timestamps are DATETIME(6), UTC; the database clock is UTC_TIMESTAMP(6)
//     in every statement and column default, so neither the session time zone
//     nor the driver's loc setting changes what is stored or compared.
//   - payload/headers are LONGTEXT/TEXT with CHECK (JSON_VALID(...)), not the
//     JSON type: MySQL re-serialises JSON documents, and the producer's bytes
//     must reach consumers unchanged. Identifier columns are utf8mb4_bin.
//   - Migrations are embedded (sql/*.sql) and versioned in
//     <outbox>_migrations. MySQL DDL is not transactional, so two processes
//     are serialized with GET_LOCK, and every step is idempotent: CREATE TABLE
//     IF NOT EXISTS, and CREATE INDEX only after information_schema shows the
//     index missing (MySQL 8 has no CREATE INDEX IF NOT EXISTS).
//   - The inbox (inbox.go, sql/002_inbox.sql) dedupes with INSERT ... ON
//     DUPLICATE KEY UPDATE followed by a locking read, not INSERT IGNORE and
//     not a duplicate-key error; inbox.go says why. It runs in the
//     application's transactions and does not depend on their isolation
//     level, on clientFoundRows, on a strict sql_mode, or on the order in
//     which the server evaluates an upsert's assignments.
//
// event_id is unique in the hot table only: a producer that inserts an
// already delivered event id again gets it delivered again (consumers
// dedupe). Archived rows keep their outbox id, which relies on AUTO_INCREMENT
// never going back (persistent in MySQL 8 and MariaDB 10.6; do not TRUNCATE
// the outbox table). The outbox and inbox table names may have at most 53
// characters, so that <outbox>_migrations and <inbox>_status_chk fit
// MySQL's 64.
//
// Every SQL statement of this dialect is in this package: the claim in
// claim.go, the schema in sql/, the rest here and in dialect.go.
package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Options configure the store. The zero value is usable.
type Options struct {
	Tables store.Tables // Schema is the MySQL database; default: the connection's
	// DeleteSent deletes a row when the broker confirmed it instead of moving
	// it to the <outbox>_sent archive. Archiving is the default: operators can
	// see what was sent, and `txbox cleanup` trims the archive.
	DeleteSent bool
	Logger     *slog.Logger // default slog.Default()
}

// Store implements store.Store on a database/sql pool.
type Store struct {
	db     *sql.DB
	owned  bool
	tables store.Tables
	opts   Options
	log    *slog.Logger
	q      queries
}

const urlField = "--db (TXBOX_DB)"

// Config converts a URL of the form
//
//	mysql://user:password@host:port/database?param=value
//
// into a driver configuration. Query parameters are the driver's DSN
// parameters (tls, timeout, charset, ...). parseTime=true and loc=UTC are
// forced; interpolateParams defaults to true (one round trip per statement).
// Errors never contain the password.
func Config(rawURL string) (*mysqldrv.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		reason := "invalid MySQL URL"
		if errors.As(err, &ue) {
			reason += ": " + redact(ue.Err.Error(), rawURL)
		}
		return nil, &txbox.ConfigError{Field: urlField, Reason: reason}
	}
	if u.Scheme != "mysql" && u.Scheme != "mariadb" {
		return nil, &txbox.ConfigError{Field: urlField, Reason: fmt.Sprintf("scheme %q is not mysql://", u.Scheme)}
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, &txbox.ConfigError{Field: urlField, Reason: "MySQL URL needs a database name: mysql://user@host:3306/dbname"}
	}
	q := u.Query()
	socket := q.Get("socket")
	q.Del("socket")
	// Let the driver parse and validate its own parameters; the DSN given to
	// it here carries no credentials, so its errors cannot leak them.
	cfg, err := mysqldrv.ParseDSN("/" + url.PathEscape(db) + "?" + q.Encode())
	if err != nil {
		return nil, &txbox.ConfigError{Field: urlField, Reason: "invalid MySQL URL parameter: " + redact(err.Error(), rawURL)}
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	switch {
	case socket != "":
		cfg.Net, cfg.Addr = "unix", socket
	case u.Host == "":
		return nil, &txbox.ConfigError{Field: urlField, Reason: "MySQL URL needs a host (or ?socket=/path)"}
	default:
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = "3306"
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	}
	cfg.DBName = db
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if !q.Has("interpolateParams") {
		cfg.InterpolateParams = true
	}
	return cfg, nil
}

// DSN converts a mysql:// URL (see Config) into the driver's DSN string, for
// sql.Open("mysql", dsn). The result contains the password: do not log it.
func DSN(rawURL string) (string, error) {
	cfg, err := Config(rawURL)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// redact removes the URL's password (raw and decoded) from a message.
func redact(msg, rawURL string) string {
	i := strings.Index(rawURL, "://")
	if i < 0 {
		return msg
	}
	rest := rawURL[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return msg
	}
	userinfo := rest[:at]
	c := strings.Index(userinfo, ":")
	if c < 0 {
		return msg
	}
	pw := userinfo[c+1:]
	if pw == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, pw, "xxxxx")
	if dec, err := url.PathUnescape(pw); err == nil && dec != "" {
		msg = strings.ReplaceAll(msg, dec, "xxxxx")
	}
	return msg
}

// Open connects to url (mysql://...) and returns a store that owns the pool.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := Config(url)
	if err != nil {
		return nil, err
	}
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return nil, &txbox.ConfigError{Field: urlField, Reason: redact(err.Error(), url)}
	}
	db := sql.OpenDB(conn)
	db.SetConnMaxLifetime(3 * time.Minute)
	db.SetMaxIdleConns(10)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: connect %s: %s", cfg.Addr, redact(err.Error(), url))
	}
	s, err := New(db, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// maxOutboxName keeps <outbox>_migrations within MySQL's 64 characters.
const maxOutboxName = 64 - len("_migrations")

// maxInboxName keeps <inbox>_status_chk (and <inbox>_versions) within 64.
const maxInboxName = 64 - len("_status_chk")

// New wraps an existing pool opened with the "mysql" driver; Close leaves it
// open. Any parseTime / loc setting works: timestamps are read as UTC wall
// clock values whatever the driver's loc is.
func New(db *sql.DB, opts Options) (*Store, error) {
	t := opts.Tables.WithDefaults()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if len(t.Outbox) > maxOutboxName {
		return nil, &txbox.ConfigError{Field: "Tables.Outbox", Reason: fmt.Sprintf("%q is longer than %d characters (MySQL needs room for %s_migrations)", t.Outbox, maxOutboxName, t.Outbox)}
	}
	if len(t.Inbox) > maxInboxName {
		return nil, &txbox.ConfigError{Field: "Tables.Inbox", Reason: fmt.Sprintf("%q is longer than %d characters (MySQL needs room for %s_status_chk)", t.Inbox, maxInboxName, t.Inbox)}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{db: db, tables: t, opts: opts, log: opts.Logger}
	s.q = buildQueries(t.Qualified(t.Outbox), t.Qualified(t.Outbox+"_sent"))
	return s, nil
}

// DB returns the underlying pool, for the write API and tests.
func (s *Store) DB() *sql.DB { return s.db }

// Tables returns the validated table names.
func (s *Store) Tables() store.Tables { return s.tables }

// SentTable returns the (qualified) name of the archive of delivered rows.
func (s *Store) SentTable() string { return s.q.sent }

func (s *Store) Dialect() store.Dialect { return Dialect{Tables: s.tables} }

func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

func (s *Store) Close() error {
	if s.owned {
		return s.db.Close()
	}
	return nil
}

// recordCols are the columns of both tables, in scanRecord's order.
const recordCols = `id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
	payload, headers, status, retry_count, next_retry_at, locked_by, locked_until,
	occurred_at, created_at, sent_at, last_error`

// timeLayout is how timestamps are passed as parameters: UTC wall clock,
// microseconds, independent of the driver's loc.
const timeLayout = "2006-01-02 15:04:05.000000"

func sqlTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// utcTime scans a DATETIME as UTC whatever the driver settings: with
// parseTime it arrives as time.Time in the driver's loc (its wall clock is
// the stored UTC value); without, as text.
type utcTime struct {
	t     time.Time
	valid bool
}

func (u *utcTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		u.valid = false
		return nil
	case time.Time:
		u.t = time.Date(x.Year(), x.Month(), x.Day(), x.Hour(), x.Minute(), x.Second(), x.Nanosecond(), time.UTC)
	case []byte:
		return u.parse(string(x))
	case string:
		return u.parse(x)
	default:
		return fmt.Errorf("mysql: cannot scan %T into a timestamp", v)
	}
	u.valid = true
	return nil
}

func (u *utcTime) parse(s string) error {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
	if err != nil {
		return fmt.Errorf("mysql: timestamp %q: %w", s, err)
	}
	u.t, u.valid = t, true
	return nil
}

func (u utcTime) ptr() *time.Time {
	if !u.valid {
		return nil
	}
	t := u.t
	return &t
}

// scanRecord reads recordCols, then extra destinations.
func scanRecord(row interface{ Scan(...any) error }, extra ...any) (store.Record, error) {
	var r store.Record
	var status string
	var lockedBy, lastErr sql.NullString
	var next, until, occurred, created, sent utcTime
	dest := append([]any{&r.ID, &r.EventID, &r.AggregateType, &r.AggregateID, &r.AggregateVersion, &r.EventType,
		&r.Payload, &r.Headers, &status, &r.RetryCount, &next, &lockedBy, &until,
		&occurred, &created, &sent, &lastErr}, extra...)
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	r.Status = txbox.Status(status)
	r.NextRetryAt, r.LockedUntil, r.SentAt = next.ptr(), until.ptr(), sent.ptr()
	r.OccurredAt, r.CreatedAt = occurred.t, created.t
	r.LockedBy, r.LastError = lockedBy.String, lastErr.String
	return r, nil
}

func collect(rows *sql.Rows) ([]store.Record, error) {
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// inList renders "?, ?, ?" for n values and appends them to args.
func inList[T any](vals []T, args []any) (string, []any) {
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
		args = append(args, v)
	}
	return b.String(), args
}

// retryable reports an InnoDB deadlock victim or lock wait timeout: the
// transaction was rolled back and may simply run again.
func retryable(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// inTx runs fn in a READ COMMITTED transaction, again when InnoDB rolled it
// back as a deadlock victim.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
			}
		}
		err = s.tx1(ctx, fn)
		if err == nil || !retryable(err) {
			return err
		}
	}
	return err
}

func (s *Store) tx1(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *Store) exec(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

const fence = ` AND locked_by = ? AND status = 'PROCESSING'`

// MarkSent moves the rows this lease holds into the archive (or deletes
// them with DeleteSent), in one transaction.
func (s *Store) MarkSent(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	ids = sortedUnique(ids)
	if s.opts.DeleteSent {
		in, args := inList(ids, nil)
		n, err := s.exec(ctx, `DELETE FROM `+s.q.table+` WHERE id IN (`+in+`)`+fence, append(args, lease)...)
		if err != nil {
			return 0, fmt.Errorf("mysql: mark sent: %w", refused(err))
		}
		return n, nil
	}
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// Lock and fence first: only the rows still held by this lease move.
		in, args := inList(ids, nil)
		rows, err := tx.QueryContext(ctx, `SELECT id FROM `+s.q.table+` WHERE id IN (`+in+`)`+fence+` ORDER BY id FOR UPDATE`, append(args, lease)...)
		if err != nil {
			return err
		}
		var held []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			held = append(held, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		n = int64(len(held))
		if n == 0 {
			return nil
		}
		in, args = inList(held, nil)
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+s.q.sent+` (`+recordCols+`)
			SELECT id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
				payload, headers, 'SENT', retry_count, NULL, NULL, NULL,
				occurred_at, created_at, UTC_TIMESTAMP(6), last_error
			FROM `+s.q.table+` WHERE id IN (`+in+`)`, args...); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM `+s.q.table+` WHERE id IN (`+in+`)`, args...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: mark sent: %w", refused(err))
	}
	return n, nil
}

// MarkFailed updates each row in its own fenced statement, in id order (the
// order every transaction here locks rows in), all in one transaction.
func (s *Store) MarkFailed(ctx context.Context, lease string, fs []store.Failure) (int64, error) {
	if len(fs) == 0 {
		return 0, nil
	}
	fs = slices.Clone(fs)
	slices.SortStableFunc(fs, func(a, b store.Failure) int { return cmp.Compare(a.ID, b.ID) })
	var total int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		total = 0
		for _, f := range fs {
			var res sql.Result
			var err error
			msg := store.Truncate(f.Error, 2000)
			if f.Dead {
				res, err = tx.ExecContext(ctx, `UPDATE `+s.q.table+` SET status = 'DEAD', retry_count = retry_count + 1,
					next_retry_at = NULL, last_error = ?, locked_by = NULL, locked_until = NULL
					WHERE id = ?`+fence, msg, f.ID, lease)
			} else {
				res, err = tx.ExecContext(ctx, `UPDATE `+s.q.table+` SET status = 'RETRY', retry_count = retry_count + 1,
					next_retry_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, last_error = ?, locked_by = NULL, locked_until = NULL
					WHERE id = ?`+fence, max(f.Delay, 0).Microseconds(), msg, f.ID, lease)
			}
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mysql: mark failed: %w", err)
	}
	return total, nil
}

func (s *Store) Release(ctx context.Context, lease string, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	in, args := inList(sortedUnique(ids), nil)
	n, err := s.exec(ctx, `UPDATE `+s.q.table+` SET status = CASE WHEN retry_count > 0 THEN 'RETRY' ELSE 'PENDING' END,
		next_retry_at = CASE WHEN retry_count > 0 THEN UTC_TIMESTAMP(6) ELSE NULL END,
		locked_by = NULL, locked_until = NULL
		WHERE id IN (`+in+`)`+fence, append(args, lease)...)
	if err != nil {
		return 0, fmt.Errorf("mysql: release: %w", err)
	}
	return n, nil
}

// Stats counts the hot table by status and the archive as SENT. Counting
// the archive reads it; Cleanup is what keeps it small.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{Counts: map[txbox.Status]int64{}}
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM `+s.q.table+` GROUP BY status
		UNION ALL SELECT 'SENT', COUNT(*) FROM `+s.q.sent)
	if err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("mysql: stats: %w", err)
		}
		if n > 0 {
			st.Counts[txbox.Status(status)] += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	var oldest utcTime
	var ageUs sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT MIN(created_at), TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6))
		FROM `+s.q.table+` WHERE unsent = 1`).Scan(&oldest, &ageUs)
	if err != nil {
		return st, fmt.Errorf("mysql: stats: %w", err)
	}
	st.OldestPending = oldest.ptr()
	if ageUs.Valid {
		st.OldestAge = time.Duration(ageUs.Int64) * time.Microsecond
	}
	st.Dead = st.Counts[txbox.StatusDead]
	return st, nil
}

func ph(int) string { return "?" }

// filter builds the WHERE clause for f; timestamps become UTC text.
func filter(f store.Filter) (string, []any) {
	where, args := store.FilterSQL(f, ph, 1)
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			args[i] = sqlTime(t)
		}
	}
	return where, args
}

// List reads the hot table and, unless the filter asks for a status that
// never is archived, the archive of SENT rows.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Record, error) {
	where, args := filter(f)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	lim := strconv.Itoa(limit)
	var parts []string
	var all []any
	if f.Status != txbox.StatusSent {
		parts = append(parts, `(SELECT `+recordCols+` FROM `+s.q.table+` WHERE `+where+` ORDER BY id LIMIT `+lim+`)`)
		all = append(all, args...)
	}
	if f.Status == "" || f.Status == txbox.StatusSent {
		parts = append(parts, `(SELECT `+recordCols+` FROM `+s.q.sent+` WHERE `+where+` ORDER BY id LIMIT `+lim+`)`)
		all = append(all, args...)
	}
	q := strings.Join(parts, " UNION ALL ")
	if len(parts) > 1 {
		q += ` ORDER BY id LIMIT ` + lim
	}
	rows, err := s.db.QueryContext(ctx, q, all...)
	if err != nil {
		return nil, fmt.Errorf("mysql: list: %w", err)
	}
	recs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("mysql: list: %w", err)
	}
	return recs, nil
}

func (s *Store) Replay(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(store.DeadOnly(f))
	n, err := s.exec(ctx, `UPDATE `+s.q.table+` SET status = 'PENDING', retry_count = 0, next_retry_at = NULL,
		locked_by = NULL, locked_until = NULL WHERE `+where, args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: replay: %w", err)
	}
	return n, nil
}

func (s *Store) Purge(ctx context.Context, f store.Filter) (int64, error) {
	where, args := filter(store.DeadOnly(f))
	n, err := s.exec(ctx, `DELETE FROM `+s.q.table+` WHERE `+where, args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: purge: %w", err)
	}
	return n, nil
}

// Cleanup deletes archived rows sent before now - age, oldest first, batch
// rows per statement: one unbounded DELETE locks everything at once
// (NServiceBus.Persistence.Sql#778). The archive is not touched by claims,
// so cleanup never contends with the relay.
func (s *Store) Cleanup(ctx context.Context, age time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var total int64
	for {
		n, err := s.exec(ctx, `DELETE FROM `+s.q.sent+` WHERE sent_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
			ORDER BY sent_at, id LIMIT ?`, age.Microseconds(), batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("mysql: cleanup: %w", err)
		}
		if n < int64(batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

func sortedUnique(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
