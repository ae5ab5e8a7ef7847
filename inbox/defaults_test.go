package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	membroker "github.com/txbox/txbox/broker/mem"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/sqlite"
)

func TestWithDefaults(t *testing.T) {
	c := inbox.Config{}.WithDefaults()
	if c.MaxAttempts != inbox.DefaultMaxAttempts || c.BackoffBase != inbox.DefaultBackoffBase || c.BackoffMax != inbox.DefaultBackoffMax ||
		c.BatchSize != inbox.DefaultBatchSize || c.TxBatch != inbox.DefaultTxBatch || c.HoldFor != inbox.DefaultHoldFor ||
		c.MaxHeld != inbox.DefaultMaxHeld || c.ReplayInterval != inbox.DefaultReplayInterval || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
}

// New refuses a missing store or handler with a config error naming it.
func TestNewRequiresStoreAndHandler(t *testing.T) {
	sub := membroker.New(membroker.Options{}).Subscribe("x")
	var pg *postgres.Store
	_, err := inbox.New(pg, inbox.Config{Name: "n", Subscriber: sub}, func(context.Context, pgx.Tx, txbox.Event) error { return nil })
	var ce *txbox.ConfigError
	if !errors.As(err, &ce) || ce.Field != "store" {
		t.Errorf("nil store: %v", err)
	}
	s := storeenv.OpenSQLite(t, sqlite.Options{})
	_, err = inbox.New(s, inbox.Config{Name: "n", Subscriber: sub}, nil)
	if !errors.As(err, &ce) || ce.Field != "handler" {
		t.Errorf("nil handler: %v", err)
	}
	_, err = inbox.New(s, inbox.Config{Name: "n"}, func(context.Context, *sql.Tx, txbox.Event) error { return nil })
	if !errors.As(err, &ce) || ce.Field != "Subscriber" {
		t.Errorf("no subscriber: %v", err)
	}
}
