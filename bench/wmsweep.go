package main

// `bench wmsweep`: Watermill's forwarder at every setting worth trying, so
// the comparison is with Watermill at its best: SubscribeBatchSize 100,
// 1000, 5000, each with the default schema (offsets per consumer group)
// and with the queue schema that deletes on ack, at each backlog size.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

func wmsweepCmd(args []string) error {
	fs := newFlags("wmsweep")
	pg, natsURL := fs.services()
	sizes := fs.String("events", "100000,1000000", "backlog sizes, comma separated")
	batches := fs.String("batches", "100,1000,5000", "SubscribeBatchSize values, comma separated")
	schemas := fs.String("schemas", "default,queue", "schemas: default, queue")
	aggs := fs.Int("aggregates", 100_000, "aggregates in the events' metadata (Watermill keeps one global order)")
	runs := fs.Int("runs", 3, "runs per setting")
	timeout, stall := fs.drainLimits()
	capAt := fs.Duration("cap", 0, "stop a drain after this long and report its rate so far, marked partial (0: no cap; --timeout still fails a run)")
	poll := fs.Duration("wm-poll", 10*time.Millisecond, "Watermill PollInterval")
	fs.parse(args)
	ints := func(flagName, s string) ([]int, error) {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--%s: %q is not a positive number", flagName, f)
			}
			out = append(out, n)
		}
		return out, nil
	}
	evs, err := ints("events", *sizes)
	if err != nil {
		return err
	}
	bs, err := ints("batches", *batches)
	if err != nil {
		return err
	}
	ss, err := contenderList(*schemas, []string{"default", "queue"})
	if err != nil {
		return fmt.Errorf("--schemas: %w", err)
	}
	ctx := context.Background()
	type row struct {
		wm   wmOpts
		n    int
		rate float64
		// partial: at least one run was stopped at --cap; the rate is
		// over what it delivered by then.
		partial bool
	}
	var rows []row
	for _, n := range evs {
		for _, schema := range ss {
			for _, b := range bs {
				wm := wmOpts{batch: b, schema: schema, poll: *poll, perTx: 1, driver: "pgx"}
				o := drainOpts{events: n, aggs: *aggs, batch: b, timeout: *timeout, stall: *stall}
				if *capAt > 0 {
					o.timeout = min(*capAt, *timeout)
				}
				var rs []drainResult
				partial := false
				for r := range *runs {
					e, err := newEnv(ctx, *pg, *natsURL, false)
					if err != nil {
						return err
					}
					err = e.writeWatermillBacklog(ctx, o, &wm)
					var res drainResult
					if err == nil {
						res, err = drainWatermill(ctx, e, o, wm)
					}
					e.close()
					var to *timedOut
					note := ""
					if *capAt > 0 && errors.As(err, &to) {
						// A capped run: its rate over what it delivered.
						res, err = drainResult{events: to.n, elapsed: to.after}, nil
						partial = true
						note = fmt.Sprintf("  partial: %d of %d in %v", to.n, to.want, to.after.Round(time.Second))
					}
					if err != nil {
						return fmt.Errorf("%d events, %s schema, batch %d: %w", n, schema, b, err)
					}
					rs = append(rs, res)
					fmt.Printf("  %8d events  %-7s batch %-5d run %d %8.0f events/s%s\n", n, schema, b, r+1, res.rate(), note)
				}
				rows = append(rows, row{wm, n, medianOf(rs, drainResult.rate), partial})
			}
		}
	}
	fmt.Printf("\nwmsweep: Watermill forwarder (watermill-sql v4 -> watermill-nats v2), PollInterval %v, medians of %d runs\n", *poll, *runs)
	fmt.Printf("| backlog | schema | SubscribeBatchSize | events/s |\n|---|---|---|---|\n")
	best := map[int]row{}
	for _, r := range rows {
		mark := ""
		if r.partial {
			mark = fmt.Sprintf(" (partial: stopped at %v)", *capAt)
		}
		fmt.Printf("| %d | %s | %d | %.0f%s |\n", r.n, r.wm.schema, r.wm.batch, r.rate, mark)
		// A partial rate is not a drain's: it is never called best.
		if !r.partial && r.rate > best[r.n].rate {
			best[r.n] = r
		}
	}
	for _, n := range evs {
		b := best[n]
		fmt.Printf("RESULT Watermill best at %d events: %.0f events/s (%s schema, SubscribeBatchSize %d)\n", n, b.rate, b.wm.schema, b.wm.batch)
	}
	return nil
}
