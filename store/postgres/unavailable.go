package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txbox/txbox/store"
)

var _ store.OutageClassifier = Dialect{}

// unavailableStates are the SQLSTATEs of a server that cannot take the
// work now, whatever the work; class 08 (connection exception) is taken
// whole besides.
var unavailableStates = map[string]bool{
	// A session ended under the statement: an administrator or a failover
	// tool terminated it (57P01), the server crashed (57P02), it is
	// starting, shutting down or in recovery and accepts no sessions
	// (57P03), or it closed an idle session (57P05).
	"57P01": true, "57P02": true, "57P03": true, "57P05": true,
	// A read-only transaction was asked to write: what a hot standby
	// answers, and a primary demoted by a failover, or a database set to
	// default_transaction_read_only for maintenance.
	"25006": true,
	// The server's limits, not the statement's: no connection slot left,
	// no disk to write to, an i/o error on its files.
	"53300": true, "53100": true, "58030": true,
}

// IsUnavailable reports whether err, from this store's statements or from
// a handler's on the store's transaction (pgx or database/sql through pgx's
// stdlib driver), says the database is unavailable rather than that the
// statement failed: see store.OutageClassifier.
//
// Besides the SQLSTATEs above: any failure to connect (pgconn.ConnectError,
// whatever the reason: refused, the server starting up, too many
// connections, a password rotated under the pool), and a connection the
// driver found closed (pgconn.ErrConnClosed, what pgx returns once the
// socket went away) or lost (store.ConnectionLost). Serialization failures
// and deadlocks (40001, 40P01) are not outages: they are contention that a
// retry resolves, and an event may well cause them itself.
func (Dialect) IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) { // before PgError: a refused login carries one
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return unavailableStates[pe.Code] || len(pe.Code) == 5 && pe.Code[:2] == "08"
	}
	return errors.Is(err, pgconn.ErrConnClosed) || store.ConnectionLost(err)
}
