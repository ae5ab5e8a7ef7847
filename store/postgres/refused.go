package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txbox/txbox/store"
)

// refused wraps an error of the rows' own making with store.ErrRefused:
// SQLSTATE class 22 (data exception: a value the column cannot hold),
// class 23 (integrity constraint: a duplicate key, a CHECK, a foreign key)
// and P0001 (RAISE EXCEPTION, a trigger saying no).
func refused(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code[:2] == "22" || pe.Code[:2] == "23" || pe.Code == "P0001") {
		return store.Refused(err)
	}
	return err
}
