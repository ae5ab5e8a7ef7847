package storeenv

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/txbox/txbox/store"
)

// onSQL is the part of the harness that MySQL and SQLite share, their
// stores being on database/sql.
type onSQL struct{}

// sqlStore is a store on database/sql.
type sqlStore interface {
	store.Store
	DB() *sql.DB
}

// SQLDB is the store's *sql.DB.
func (onSQL) SQLDB(_ *testing.T, s store.Store) *sql.DB { return s.(sqlStore).DB() }

func (onSQL) Begin(t *testing.T, s store.Store) (store.Tx, func() error, func() error) {
	tx, err := s.(sqlStore).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() }) // see Postgres.Begin
	return store.SQLTx(tx), tx.Commit, tx.Rollback
}

func (onSQL) ForeignInsert(t *testing.T, s store.Store, eventID, aggType, aggID, eventType, payload string) {
	_, err := s.(sqlStore).DB().Exec(fmt.Sprintf(
		`INSERT INTO %s (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES (?, ?, ?, ?, ?)`,
		s.Tables().Outbox), eventID, aggType, aggID, eventType, payload)
	if err != nil {
		t.Fatal(err)
	}
}
