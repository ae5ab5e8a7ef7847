package outbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// benchOrder is the event of bench/write.go: about 280 bytes of JSON.
type benchOrder struct {
	OrderID  int64  `json:"order_id"`
	Customer int    `json:"customer"`
	Amount   int    `json:"amount"`
	Note     string `json:"note"`
}

var benchNote = strings.Repeat("n", 200)

// discardTx accepts every statement and keeps nothing.
type discardTx struct{}

func (discardTx) Exec(context.Context, string, ...any) (int64, error) { return 1, nil }
func (discardTx) QueryRow(context.Context, string, ...any) store.Row  { return nil }

// BenchmarkAddNoDB is the CPU txbox's write API spends in this process per
// event, without a database: "handwritten" is what a hand-written outbox
// INSERT does before the driver (marshal, new id, the statement's values),
// "txbox" is NewEvent + Writer.Add down to the statement's values.
func BenchmarkAddNoDB(b *testing.B) {
	ctx := context.Background()
	b.Run("handwritten", func(b *testing.B) {
		q := `INSERT INTO bench_outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, $3, $4, $5)`
		tx := discardTx{}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			payload, err := json.Marshal(benchOrder{OrderID: int64(i), Customer: 7, Amount: 4200, Note: benchNote})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(ctx, q, txbox.NewID(), "Order", strconv.Itoa(i), "OrderCreated", payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("txbox", func(b *testing.B) {
		w := outbox.NewWriter(postgres.Dialect{Tables: store.Tables{Outbox: "bench_outbox"}})
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ev, err := txbox.NewEvent("Order", strconv.Itoa(i), "OrderCreated", benchOrder{OrderID: int64(i), Customer: 7, Amount: 4200, Note: benchNote})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Add(ctx, discardTx{}, ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPgxtxAdd is one committed transaction per iteration holding one
// event, written by hand (the 5-column INSERT of the table contract) and
// through NewEvent + pgxtx.Add, on a migrated outbox table of its own.
// Commit latency dominates; for throughput under concurrency see
// bench/write.go. Skips when PostgreSQL (TXBOX_TEST_POSTGRES) is missing.
func BenchmarkPgxtxAdd(b *testing.B) {
	s := storeenv.MigratedPostgres(b, postgres.Options{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	table := s.Tables().Qualified(s.Tables().Outbox)
	run := func(b *testing.B, add func(tx pgx.Tx, o benchOrder) error) {
		b.ReportAllocs()
		start := time.Now()
		for i := 0; b.Loop(); i++ {
			o := benchOrder{OrderID: int64(i), Customer: 7, Amount: 4200, Note: benchNote}
			if err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return add(tx, o) }); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tx/s")
	}
	b.Run("handwritten", func(b *testing.B) {
		q := `INSERT INTO ` + table + ` (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, $3, $4, $5)`
		run(b, func(tx pgx.Tx, o benchOrder) error {
			payload, err := json.Marshal(o)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, q, txbox.NewID(), "Order", strconv.FormatInt(o.OrderID, 10), "OrderCreated", payload)
			return err
		})
	})
	b.Run("txbox", func(b *testing.B) {
		w := outbox.NewWriter(s.Dialect())
		run(b, func(tx pgx.Tx, o benchOrder) error {
			ev, err := txbox.NewEvent("Order", strconv.FormatInt(o.OrderID, 10), "OrderCreated", o)
			if err != nil {
				return err
			}
			return pgxtx.Add(ctx, tx, w, ev)
		})
	})
}
