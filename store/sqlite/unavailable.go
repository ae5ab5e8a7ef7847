package sqlite

import (
	"errors"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/txbox/txbox/store"
)

var _ store.OutageClassifier = Dialect{}

// unavailableCodes are the primary result codes (the low byte of the
// extended ones) of a database file that cannot be written now, whatever
// the statement:
//   - SQLITE_READONLY: the file, its directory or the connection is
//     read-only (a volume remounted read-only, a file restored without
//     write permission, PRAGMA query_only for maintenance), or its journal
//     needs a recovery only a writer can do;
//   - SQLITE_IOERR: the operating system failed a read, write or sync (a
//     disk or network volume going away);
//   - SQLITE_FULL: the disk is full;
//   - SQLITE_CANTOPEN: the file, or its journal or WAL, cannot be opened
//     (a volume unmounted, a directory gone or made unwritable).
//
// SQLITE_BUSY and SQLITE_LOCKED are not outages: another connection held a
// lock past the busy timeout, contention that a retry resolves and that a
// handler's own long transaction may cause, as a lock wait timeout is on
// the server databases.
var unavailableCodes = map[int]bool{
	sqlite3.SQLITE_READONLY: true,
	sqlite3.SQLITE_IOERR:    true,
	sqlite3.SQLITE_FULL:     true,
	sqlite3.SQLITE_CANTOPEN: true,
}

// IsUnavailable reports whether err, from this store's statements or from
// a handler's on the store's *sql.Tx, says the database file cannot be
// written now rather than that the statement failed: see
// store.OutageClassifier. A lost connection (store.ConnectionLost) counts
// too, for a handler's failure on a database of another kind.
func (Dialect) IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlitedrv.Error
	if errors.As(err, &se) {
		return unavailableCodes[se.Code()&0xff]
	}
	return store.ConnectionLost(err)
}
