package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store/postgres"
)

// Production is what the producers did, as they saw it. Its counts are
// logged; what the checker trusts is the ledger table (see ledgerDDL).
type Production struct {
	mu         sync.Mutex
	Committed  int
	RolledBack map[string]bool // event ids of transactions rolled back on purpose
	Errors     int
	wait       func()
}

// Wait returns when every producer has stopped.
func (p *Production) Wait() { p.wait() }

var errRollback = errors.New("rolled back on purpose")

// Produce runs n producers until ctx ends. Each transaction bumps its
// order's version under the row lock, so an aggregate's versions are
// contiguous and in commit order, and writes the event with that version.
// A share of transactions roll back on purpose; a share of aggregates are
// hot and get most of the events.
func Produce(ctx context.Context, w *World, producers int, rate float64, seed uint64, rollbackShare float64) *Production {
	p := &Production{RolledBack: map[string]bool{}}
	writer := outbox.NewWriter(postgres.Dialect{Tables: w.Tables})
	var wg sync.WaitGroup
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			pace := time.Duration(float64(time.Second) * float64(producers) / rate)
			next := time.Now()
			for ctx.Err() == nil {
				var agg string
				switch {
				case w.Skew.Load() && rng.Float64() < 0.9:
					agg = fmt.Sprintf("hot-%d", rng.IntN(3)) // the skewed-keys fault: three hot aggregates take 90%
				case rng.Float64() < 0.5:
					agg = fmt.Sprintf("hot-%d", rng.IntN(5)) // five hot aggregates take half the events
				default:
					agg = fmt.Sprintf("order-%d", rng.IntN(2000))
				}
				rollback := rng.Float64() < rollbackShare
				var evID string
				err := pgx.BeginFunc(ctx, w.Prod, func(tx pgx.Tx) error {
					var v int64
					if err := tx.QueryRow(ctx, `INSERT INTO orders (id, version) VALUES ($1, 1)
						ON CONFLICT (id) DO UPDATE SET version = orders.version + 1 RETURNING version`, agg).Scan(&v); err != nil {
						return err
					}
					ev := txbox.MustEvent("Order", agg, "OrderChanged", map[string]any{"order": agg, "version": v})
					ev.AggregateVersion = v
					evID = ev.ID
					if err := writer.AddPgx(ctx, tx, ev); err != nil {
						return err
					}
					if err := recordLedger(ctx, tx, ev); err != nil {
						return err
					}
					if rollback {
						return errRollback
					}
					return nil
				})
				p.mu.Lock()
				switch {
				case errors.Is(err, errRollback):
					p.RolledBack[evID] = true
				case err != nil:
					if ctx.Err() == nil {
						p.Errors++
					}
				default:
					p.Committed++
				}
				p.mu.Unlock()
				next = next.Add(pace)
				if d := time.Until(next); d > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(d):
					}
				} else {
					next = time.Now()
				}
			}
		}()
	}
	p.wait = wg.Wait
	return p
}

// ledgerDDL is the producers' own record of what they committed: one row per
// event, written by the producer's code in the business transaction, in a
// table txbox never reads or writes. A row is there exactly when the
// transaction committed, whatever the producer saw of the COMMIT (a backend
// terminated during it, a read-only database): the checker takes
// "committed" from here, never from the outbox tables under test.
const ledgerDDL = `CREATE TABLE ledger (
	event_id TEXT PRIMARY KEY, aggregate_id TEXT NOT NULL, version BIGINT NOT NULL,
	committed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())`

func recordLedger(ctx context.Context, tx pgx.Tx, ev txbox.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO ledger (event_id, aggregate_id, version) VALUES ($1, $2, $3)`,
		ev.ID, ev.AggregateID, ev.AggregateVersion)
	return err
}
