package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/open"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
)

// history answers: does the claim slow down as delivered history grows?
// It drains the same backlog (claim + mark, the relay's store work) on a
// fresh table and after `history` rows went through the full
// insert -> claim -> mark path, and reports medians of `runs` drains.
func history(args []string) error {
	fs := flag.NewFlagSet("history", flag.ExitOnError)
	db := fs.String("db", "", "database URL")
	hist := fs.Int("history", 2_000_000, "delivered rows to put behind the table")
	backlog := fs.Int("backlog", 50_000, "rows per measured drain")
	batch := fs.Int("batch", 500, "claim size")
	runs := fs.Int("runs", 3, "measured drains per phase")
	_ = fs.Parse(args)
	ctx := context.Background()
	quiet := quiet()
	sfx := txbox.NewID()[24:]
	tb := store.Tables{Outbox: "bench_ob" + sfx[:6], Inbox: "bench_ib" + sfx[:6]}
	s, err := open.Store(ctx, *db, open.StoreOptions{Tables: tb, Logger: quiet})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	defer dropTables(ctx, s, tb)

	measure := func(phase string) ([]float64, error) {
		var rates []float64
		for r := range *runs {
			if err := fill(ctx, s, *backlog, fmt.Sprintf("%s-%d", phase, r)); err != nil {
				return nil, err
			}
			storeTimes.claim, storeTimes.finish = 0, 0
			start := time.Now()
			n, err := drainStore(ctx, s, *batch)
			if err != nil {
				return nil, err
			}
			rate := float64(n) / time.Since(start).Seconds()
			rates = append(rates, rate)
			fmt.Printf("  %-8s run %d: %d rows in %v = %.0f rows/s (claims %v, finishes %v)\n", phase, r+1, n,
				time.Since(start).Round(time.Millisecond), rate, storeTimes.claim.Round(time.Millisecond), storeTimes.finish.Round(time.Millisecond))
		}
		return rates, nil
	}
	fmt.Printf("claim+mark drain of %d rows, batch %d, %d runs per phase, db %s\n", *backlog, *batch, *runs, open.Redact(*db))
	fresh, err := measure("fresh")
	if err != nil {
		return err
	}
	fmt.Printf("building %d rows of delivered history through insert -> claim -> mark ...\n", *hist)
	t0 := time.Now()
	for done := 0; done < *hist; {
		n := min(100_000, *hist-done)
		if err := fill(ctx, s, n, fmt.Sprintf("h%d", done)); err != nil {
			return err
		}
		if _, err := drainStore(ctx, s, 5000); err != nil {
			return err
		}
		done += n
	}
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("history built in %v: %v\n", time.Since(t0).Round(time.Second), st.Counts)
	// The fresh phase ran on a checkpointed server (all.sh); so does this
	// one, instead of during the build's writes being flushed.
	if p, ok := s.(interface{ Pool() *pgxpool.Pool }); ok {
		if _, err := p.Pool().Exec(ctx, "CHECKPOINT"); err != nil {
			fmt.Printf("(CHECKPOINT failed: %v; measuring anyway)\n", err)
		}
	}
	aged, err := measure("history")
	if err != nil {
		return err
	}
	mf, ma := median(fresh), median(aged)
	fmt.Printf("RESULT fresh median %.0f rows/s, with %d delivered rows %.0f rows/s, ratio %.2f\n", mf, *hist, ma, ma/mf)
	return nil
}

func fill(ctx context.Context, s store.Store, n int, tag string) error {
	w := outbox.NewWriter(s.Dialect())
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		evs := make([]txbox.Event, 0, chunk)
		for j := i; j < min(n, i+chunk); j++ {
			evs = append(evs, txbox.MustEvent("Order", fmt.Sprintf("%s-%d", tag, j%5000), "OrderCreated", map[string]any{"i": j, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}))
		}
		if err := inTx(ctx, s, func(tx store.Tx) error { return w.Add(ctx, tx, evs...) }); err != nil {
			return err
		}
	}
	return nil
}

// drainStore does the relay's store work without a broker: transaction
// claims where the store has them (as the relay does), else lease claims.
func drainStore(ctx context.Context, s store.Store, batch int) (int, error) {
	if tc, ok := s.(store.TxClaimer); ok {
		return drainStoreTx(ctx, tc, batch)
	}
	total := 0
	for i := 0; ; i++ {
		lease := fmt.Sprintf("bench-%d", i)
		recs, err := s.Claim(ctx, store.ClaimRequest{Lease: lease, Limit: batch, LeaseFor: time.Minute})
		if err != nil {
			return total, err
		}
		if len(recs) == 0 {
			return total, nil
		}
		ids := make([]int64, len(recs))
		for j, r := range recs {
			ids[j] = r.ID
		}
		if _, err := s.MarkSent(ctx, lease, ids); err != nil {
			return total, err
		}
		total += len(recs)
	}
}

// storeTimes splits the measured drains' time between claiming and
// finishing (marks + commit), to show which one history slows.
var storeTimes struct{ claim, finish time.Duration }

func drainStoreTx(ctx context.Context, s store.TxClaimer, batch int) (int, error) {
	total := 0
	for {
		t0 := time.Now()
		c, err := s.ClaimTx(ctx, batch)
		storeTimes.claim += time.Since(t0)
		if err != nil {
			return total, err
		}
		recs := c.Records()
		if len(recs) == 0 {
			return total, nil
		}
		ids := make([]int64, len(recs))
		for j, r := range recs {
			ids[j] = r.ID
		}
		t1 := time.Now()
		if err := c.Finish(ctx, ids, nil); err != nil {
			return total, err
		}
		storeTimes.finish += time.Since(t1)
		total += len(recs)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
