package sqlinbox

import (
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqltemplate"
)

// Statements keeps a database/sql Dialect's inbox statements (Q, built by
// build for the inbox table as SQL names it) per set of table names, or why
// the names are refused: they are pasted into SQL, and a Dialect may be
// built by hand. check adds a dialect's own rule (nil: none).
func Statements[Q any](build func(inbox string) Q, check func(store.Tables) error) *sqltemplate.Cache[store.Tables, Q] {
	return &sqltemplate.Cache[store.Tables, Q]{Build: func(t store.Tables) (Q, error) {
		t, err := sqlstore.Tables(t)
		if err == nil && check != nil {
			err = check(t)
		}
		return build(t.Qualified(t.Inbox)), err
	}}
}
