package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// cdcSetup prepares e's empty outbox for a relay in --mode cdc: the
// publication and a slot made before any write (so every event is in its
// log, tableless ones too, and none is read from the table); the
// returned function drops the slot, once no relay reads it, and the
// publication.
func cdcSetup(ctx context.Context, e *benchEnv) (slot string, cleanup func(), err error) {
	s, err := postgres.New(e.pool, postgres.Options{Tables: e.tables, Logger: quiet()})
	if err != nil {
		return "", nil, err
	}
	if err := cdc.Migrate(ctx, s); err != nil {
		return "", nil, err
	}
	slot = "bench_" + e.sfx
	// The outbox is empty: nothing older than the slot to deliver from the
	// table, so the relay reads everything from the log.
	if _, err := cdc.CreateSlot(ctx, s, slot, false); err != nil {
		return "", nil, err
	}
	return slot, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			err := cdc.DropSlot(ctx, s, slot)
			if err == nil || !errors.Is(err, cdc.ErrSlotActive) || ctx.Err() != nil {
				if err != nil {
					fmt.Printf("  (slot %s not dropped: %v; drop it with `txbox cdc drop-slot %s`)\n", slot, err, slot)
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = e.pool.Exec(ctx, "DROP PUBLICATION IF EXISTS "+cdc.Publication(s))
		e.extra = append(e.extra, e.tables.Outbox+"_cdc_slots")
	}, nil
}

// cdcCmd compares CDC with polling side by side: commit-to-consumer
// latency at the given rates (polling with LISTEN, CDC with rows, CDC with
// tableless events), the drain of a backlog, then the write path (a
// hand-written INSERT, txbox's row, txbox's logical message).
func cdcCmd(args []string) error {
	fs := newFlags("cdc")
	pg, natsURL := fs.services()
	rates := fs.rates("events per second of the latency runs", 500, 2000)
	duration := fs.Duration("duration", 20*time.Second, "writing time per latency run")
	writeFor := fs.Duration("write-duration", 5*time.Second, "time per write-path run")
	runs := fs.Int("runs", 3, "drain and write-path runs")
	events := fs.Int("events", 1_000_000, "drain backlog size")
	aggs := fs.Int("aggregates", 100_000, "aggregates of the drain backlog")
	fs.parse(args)
	lat := []string{"--db", *pg, "--broker", *natsURL, "--variants", "listen,cdc,cdc-tableless", "--duration", duration.String(), "--idle", "2s"}
	for _, r := range *rates {
		lat = append(lat, "--rate", fmt.Sprint(r))
	}
	fmt.Println("== latency: polling (LISTEN) vs CDC")
	if err := latencyCmd(lat); err != nil {
		return err
	}
	fmt.Println("\n== drain of a backlog: polling vs CDC (the backlog written while the slot exists, read from the log)")
	if err := drainCmd([]string{"--db", *pg, "--broker", *natsURL, "--events", fmt.Sprint(*events), "--aggregates", fmt.Sprint(*aggs),
		"--runs", fmt.Sprint(*runs), "--only", "txbox,txbox-cdc"}); err != nil {
		return err
	}
	fmt.Println("\n== write path: row vs logical message")
	return writeCmd([]string{"--db", *pg, "--duration", writeFor.String(), "--runs", fmt.Sprint(*runs), "--only", "handwritten,txbox,txbox-cdcmsg"})
}
