package mysql

import (
	"errors"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/txbox/txbox/store"
)

// refusedErrors are the server errors caused by the rows themselves:
// duplicate key (1062), foreign keys (1451, 1452), NULL (1048), value too
// long or out of range (1406, 1264, 1366), CHECK (MySQL 3819, MariaDB 4025)
// and a trigger's SIGNAL (1644).
var refusedErrors = map[uint16]bool{1062: true, 1451: true, 1452: true, 1048: true, 1406: true, 1264: true, 1366: true, 3819: true, 4025: true, 1644: true}

// refused wraps such an error with store.ErrRefused.
func refused(err error) error {
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) && refusedErrors[me.Number] {
		return store.Refused(err)
	}
	return err
}
