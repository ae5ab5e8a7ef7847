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
	"strings"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/store"
)

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
			reason += ": " + redact.String(ue.Err.Error(), rawURL)
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
		return nil, &txbox.ConfigError{Field: urlField, Reason: "invalid MySQL URL parameter: " + redact.String(err.Error(), rawURL)}
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

// Open connects to url (mysql://...) and returns a store that owns the pool.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := Config(url)
	if err != nil {
		return nil, err
	}
	cfg.Logger = driverLog{cmp.Or(opts.Logger, slog.Default())}
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return nil, &txbox.ConfigError{Field: urlField, Reason: redact.String(err.Error(), url)}
	}
	db := sql.OpenDB(conn)
	db.SetConnMaxLifetime(3 * time.Minute)
	db.SetMaxIdleConns(10)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: connect %s: %s", cfg.Addr, redact.String(err.Error(), url))
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
	s.q = newQueries(sqlArgs{Table: t.Qualified(t.Outbox), Sent: t.Qualified(t.Outbox + "_sent"), Inbox: t.Qualified(t.Inbox), Schema: t.Schema})
	return s, nil
}

// DB returns the underlying pool, for the write API and tests.
func (s *Store) DB() *sql.DB { return s.db }

// Tables returns the validated table names.
func (s *Store) Tables() store.Tables { return s.tables }

func (s *Store) Dialect() store.Dialect { return Dialect{Tables: s.tables} }

func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

func (s *Store) Close() error {
	if s.owned {
		return s.db.Close()
	}
	return nil
}
