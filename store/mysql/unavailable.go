package mysql

import (
	"errors"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox/store"
)

var _ store.OutageClassifier = Dialect{}

// unavailableErrors are the server errors of a server that cannot take the
// work now, whatever the work.
var unavailableErrors = map[uint16]bool{
	// A read-only transaction was asked to write (1792), and MySQL's
	// read-only mode (1836): a replica, or a primary demoted by a
	// failover. --read-only itself is 1290, checked apart below.
	1792: true, 1836: true,
	// No connection slot left (1040), the server shutting down (1053), the
	// session killed under the statement by an administrator or a failover
	// tool (MariaDB 1927), or closed for inactivity (MySQL 4031).
	1040: true, 1053: true, 1927: true, 4031: true,
	// Login refused (1045): the credentials were rotated under the pool;
	// no event gets in until an operator fixes them.
	1045: true,
	// The server's disk is full (1021).
	1021: true,
	// The client's codes for a server gone or unreachable (2002 socket,
	// 2003 TCP, 2006 gone away, 2013 lost during a query), for a server or
	// proxy that relays them.
	2002: true, 2003: true, 2006: true, 2013: true,
}

// IsUnavailable reports whether err, from this store's statements or from
// a handler's on the store's *sql.Tx, says the database is unavailable
// rather than that the statement failed: see store.OutageClassifier.
//
// Besides the server errors above: 1290 when it names the read-only option
// (the same number covers other options, --secure-file-priv among them,
// which refuse a statement, not a server), the driver's word for a
// connection that broke (mysql.ErrInvalidConn, which go-sql-driver returns
// for a connection closed under a query, and what it logs as "unexpected
// EOF"), and a lost connection (store.ConnectionLost). A lock wait timeout
// (1205) and a deadlock (1213) are not outages: they are contention that a
// retry resolves, and an event may well cause them itself.
func (Dialect) IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		if me.Number == 1290 {
			msg := strings.ToLower(me.Message)
			return strings.Contains(msg, "read-only") || strings.Contains(msg, "read_only")
		}
		return unavailableErrors[me.Number]
	}
	return errors.Is(err, mysqldrv.ErrInvalidConn) || store.ConnectionLost(err)
}
