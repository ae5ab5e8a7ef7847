package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/open"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// inTx runs fn in a transaction on whichever database s is.
func inTx(ctx context.Context, s store.Store, fn func(store.Tx) error) error {
	switch st := s.(type) {
	case *postgres.Store:
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		if err := fn(pgxtx.Wrap(tx)); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	case interface{ DB() *sql.DB }:
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(store.SQLTx(tx)); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	default:
		return fmt.Errorf("bench: no transactions for %T", s)
	}
}

// freshStore opens the store at url on fresh tables, outbox and inbox
// followed by a suffix of their own, and migrates them; drop drops the
// tables and closes the store.
func freshStore(ctx context.Context, url, outbox, inbox string) (s store.Store, drop func(), err error) {
	sfx := txbox.NewID()[24:]
	tb := store.Tables{Outbox: outbox + sfx[:6], Inbox: inbox + sfx[:6]}
	if s, err = open.Store(ctx, url, open.StoreOptions{Tables: tb, Logger: quiet()}); err != nil {
		return nil, nil, err
	}
	drop = func() { dropTables(ctx, s, tb); s.Close() }
	if err := s.Migrate(ctx); err != nil {
		drop()
		return nil, nil, err
	}
	return s, drop, nil
}

func dropTables(ctx context.Context, s store.Store, tb store.Tables) {
	for _, t := range []string{tb.Outbox, tb.Outbox + "_sent", tb.Outbox + "_migrations", tb.Inbox, tb.Inbox + "_versions"} {
		_ = inTx(ctx, s, func(tx store.Tx) error { _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+t); return err })
	}
}
