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
//     using it. So MarkSent moves each confirmed row, in the same
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
// Every SQL statement of this dialect is a file of queries/, printed for
// review by TestSQLGolden: the claim's (claim.go), the marks' (marks.go),
// the operator's (admin.go, count.go, backlog.go), the inbox's (inbox.go),
// the migrations' (migrate.go); the schema is in sql/. The outbox INSERT is
// sqlstore's (dialect.go).
package mysql

import (
	"database/sql"
	"log/slog"

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
