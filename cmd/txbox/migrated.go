package main

import (
	"context"
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/store"
)

// requireTable fails with one line and exit 2 when the database has not
// been migrated, instead of a relay that retries `relation ... does not
// exist` for ever or an admin command printing a raw SQL error. probe is
// any read of the table; its error is looked at only if it says the table
// (or the schema) is missing.
func requireTable(table string, err error) error {
	if err == nil || !missingTable(err) {
		return err
	}
	return &usageError{msg: fmt.Sprintf("table %s not found: run `txbox migrate --db ...` (or start the relay with --migrate)", table)}
}

// missingTable recognises "no such table" in each dialect's words:
// PostgreSQL SQLSTATE 42P01 (undefined table) and 3F000 (no such schema),
// MySQL/MariaDB errors 1146 (no such table) and 1049 (no such database),
// SQLite's "no such table".
func missingTable(err error) bool {
	return sqlstore.ErrorSays(err, "SQLSTATE 42P01", "SQLSTATE 3F000", "Error 1146", "Error 1049", "no such table")
}

// checkOutbox reads nothing from the outbox table, to find out whether it
// exists: one probe of the event_id index (a DEAD filter keeps the archive,
// which has no such index on PostgreSQL, out of it).
func checkOutbox(ctx context.Context, s store.Store) error {
	_, err := s.List(ctx, store.Filter{Status: txbox.StatusDead, EventIDs: []string{"-"}, Limit: 1})
	return requireTable(s.Tables().Qualified(s.Tables().Outbox), err)
}

// checkInbox does the same for the inbox table.
func checkInbox(ctx context.Context, s store.Store, admin store.InboxAdmin) error {
	_, err := admin.InboxList(ctx, store.InboxFilter{EventIDs: []string{"-"}, Limit: 1})
	return requireTable(s.Tables().Qualified(s.Tables().Inbox), err)
}
