package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// history answers: does the claim slow down as delivered history grows?
// It drains the same backlog (claim + mark, the relay's store work) on a
// fresh table and after `history` rows went through the full
// insert -> claim -> mark path, and reports medians of `runs` drains. By
// default the fresh and history drains alternate after the build: on this
// machine two invocations minutes apart differ by up to 20%, as much as the
// effect measured.
func history(args []string) error {
	fs := newFlags("history")
	db := fs.String("db", "", "database URL")
	hist := fs.Int("history", 2_000_000, "delivered rows to put behind the table")
	backlog := fs.Int("backlog", 50_000, "rows per measured drain")
	batch := fs.Int("batch", 500, "claim size")
	runs := fs.Int("runs", 3, "measured drains per phase")
	interleave := fs.Bool("interleave", true, "alternate fresh and history drains after the history is built (false: all fresh drains first, then the build, then the history drains)")
	vacuum := fs.Bool("vacuum", false, "VACUUM the outbox table once after building the history (PostgreSQL; what autovacuum would do)")
	fs.parse(args)
	ctx := context.Background()
	// A fresh table for each fresh run, and one table for the history.
	newTable := func() (store.Store, func(), error) { return freshStore(ctx, *db, "bench_ob", "bench_ib") }

	// Each measured drain starts checkpointed, after its backlog is
	// written: otherwise whether a checkpoint (and the full-page writes
	// after it) falls inside a drain decides more than the history does.
	measure := func(phase string, s store.Store, r int) (float64, error) {
		if err := fill(ctx, s, *backlog, fmt.Sprintf("%s-%d", phase, r)); err != nil {
			return 0, err
		}
		checkpoint(ctx, s)
		storeTimes.claim, storeTimes.finish = 0, 0
		start := time.Now()
		n, err := drainStore(ctx, s, *batch)
		if err != nil {
			return 0, err
		}
		rate := float64(n) / time.Since(start).Seconds()
		fmt.Printf("  %-8s run %d: %d rows in %v = %.0f rows/s (claims %v, finishes %v)\n", phase, r+1, n,
			time.Since(start).Round(time.Millisecond), rate, storeTimes.claim.Round(time.Millisecond), storeTimes.finish.Round(time.Millisecond))
		return rate, nil
	}
	fmt.Printf("claim+mark drain of %d rows, batch %d, %d runs per phase, db %s\n", *backlog, *batch, *runs, redact.URL(*db))
	var fresh, aged []float64
	freshRun := func(r int) error {
		s, drop, err := newTable()
		if err != nil {
			return err
		}
		defer drop()
		rate, err := measure("fresh", s, r)
		fresh = append(fresh, rate)
		return err
	}
	if !*interleave {
		for r := range *runs {
			if err := freshRun(r); err != nil {
				return err
			}
		}
	}
	s, drop, err := newTable()
	if err != nil {
		return err
	}
	defer drop()
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
	if pg, ok := s.(*postgres.Store); ok && *vacuum {
		t1 := time.Now()
		if _, err := pg.Pool().Exec(ctx, "VACUUM "+s.Tables().Outbox); err != nil {
			return err
		}
		fmt.Printf("VACUUM of the outbox table took %v\n", time.Since(t1).Round(time.Millisecond))
	}
	historyRun := func(r int) error {
		rate, err := measure("history", s, r)
		aged = append(aged, rate)
		return err
	}
	for r := range *runs {
		if !*interleave {
			if err := historyRun(r); err != nil {
				return err
			}
			continue
		}
		// The pairs alternate which goes first, so the drift of a noisy
		// machine and any order effect fall on both alike.
		first, second := historyRun, freshRun
		if r%2 == 1 {
			first, second = freshRun, historyRun
		}
		if err := first(r); err != nil {
			return err
		}
		if err := second(r); err != nil {
			return err
		}
	}
	mf, ma := median(fresh), median(aged)
	fmt.Printf("RESULT fresh median %.0f rows/s, with %d delivered rows %.0f rows/s, ratio %.2f\n", mf, *hist, ma, ma/mf)
	if *interleave {
		ratios := make([]float64, len(aged))
		for i := range aged {
			ratios[i] = aged[i] / fresh[i]
		}
		fmt.Printf("RESULT median of the per-pair ratios %.2f (pairs: %.2f)\n", median(ratios), ratios)
	}
	return nil
}

// checkpoint flushes PostgreSQL's dirty buffers (other databases: nothing).
func checkpoint(ctx context.Context, s store.Store) {
	if pg, ok := s.(*postgres.Store); ok {
		if _, err := pg.Pool().Exec(ctx, "CHECKPOINT"); err != nil {
			fmt.Printf("(CHECKPOINT failed: %v; measuring anyway)\n", err)
		}
	}
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
// claims where the store has them (PostgreSQL, as the relay does), else
// lease claims.
func drainStore(ctx context.Context, s store.Store, batch int) (int, error) {
	if ps, ok := s.(*postgres.Store); ok {
		return drainStoreTx(ctx, ps, batch)
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

func drainStoreTx(ctx context.Context, s *postgres.Store, batch int) (int, error) {
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
