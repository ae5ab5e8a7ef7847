package main

import (
	"fmt"
	"os"
	"time"
)

// smoke runs every subcommand at toy sizes, so CI notices when one stops
// working: `cd bench && go run . smoke`. The figures it prints mean
// nothing. It fails on the first error, and a watchdog fails it if it hangs.
func smoke(args []string) error {
	fs := newFlags("smoke")
	pg, natsURL := fs.services()
	limit := fs.Duration("limit", 4*time.Minute, "fail if the whole smoke run takes longer")
	fs.parse(args)
	watchdog := time.AfterFunc(*limit, func() {
		fmt.Fprintf(os.Stderr, "bench smoke: still running after %v\n", *limit)
		os.Exit(1) // child processes die with us (Pdeathsig)
	})
	defer watchdog.Stop()
	conn := []string{"--db", *pg}
	both := []string{"--db", *pg, "--broker", *natsURL}
	steps := []struct {
		name string
		fn   func([]string) error
		args []string
	}{
		{"drain", drainCmd, append(both, "--events", "2000", "--aggregates", "200", "--runs", "1", "--timeout", "60s", "--stall", "20s")},
		{"skew", skewCmd, append(both, "--events", "2000", "--layouts", "1,100,zipf", "--runs", "1", "--timeout", "60s", "--stall", "20s")},
		{"skew (kafka)", skewCmd, append(both, "--kafka", "--only", "txbox,txbox-2proc", "--events", "2000", "--layouts", "1,100", "--runs", "1", "--timeout", "60s", "--stall", "20s")},
		{"wmsweep", wmsweepCmd, append(both, "--events", "2000", "--batches", "100,1000", "--runs", "1", "--timeout", "60s", "--stall", "20s")},
		{"write", writeCmd, append(conn, "--duration", "1s", "--warmup", "200ms", "--runs", "1", "--only", "business,handwritten,txbox,txbox-wakeup")},
		{"latency", latencyCmd, append(both, "--rate", "200", "--duration", "2s", "--idle", "1s")},
		{"latency (watermill, one aggregate)", latencyCmd, append(both, "--variants", "watermill", "--aggregates", "1", "--rate", "200", "--duration", "1s", "--idle", "200ms")},
		{"cdc", cdcCmd, append(both, "--rate", "200", "--duration", "2s", "--write-duration", "1s", "--runs", "1", "--events", "2000", "--aggregates", "200")},
		{"inbox", inboxCmd, append(both, "--events", "2000", "--aggregates", "200", "--runs", "1", "--timeout", "60s")},
		{"history", history, append(conn, "--history", "2000", "--backlog", "1000", "--runs", "1")},
		{"console", consoleCmd, append(conn, "--rows", "2000", "--runs", "1")},
	}
	start := time.Now()
	for _, s := range steps {
		t := time.Now()
		fmt.Printf("=== smoke: %s %v\n", s.name, s.args)
		if err := s.fn(s.args); err != nil {
			return fmt.Errorf("smoke %s: %w", s.name, err)
		}
		fmt.Printf("=== smoke: %s ok in %v\n\n", s.name, time.Since(t).Round(100*time.Millisecond))
	}
	fmt.Printf("smoke: all %d subcommands ok in %v\n", len(steps), time.Since(start).Round(100*time.Millisecond))
	return nil
}
