package sqlite

import (
	"errors"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/txbox/txbox/store"
)

// refused wraps an error of the rows' own making with store.ErrRefused:
// SQLITE_CONSTRAINT and its extended codes (unique, check, NOT NULL, a
// trigger's RAISE(ABORT)), and SQLITE_TOOBIG.
func refused(err error) error {
	var se *sqlitedrv.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT || se.Code()&0xff == sqlite3.SQLITE_TOOBIG) {
		return store.Refused(err)
	}
	return err
}
