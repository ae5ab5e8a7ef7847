// Command bench measures txbox against the raw limits of the same machine
// and against Watermill. It is a module of its own so that comparison code
// never enters the library's dependencies.
//
//	go run . drain --events 1000000
//	go run . write
//	go run . latency --rate 500 --rate 2000 --duration 20s
//	go run . inbox --events 100000
//	go run . history --db mysql://root@127.0.0.1:3306/test --history 2000000
//	go run . console --rows 1000000 --runs 9
//	go run . skew --events 1000000
//	go run . wmsweep
//	go run . cdc --rate 500 --rate 2000   # CDC vs polling
//	go run . smoke   # every subcommand at toy sizes, for CI
package main

import (
	"fmt"
	"os"
)

// subcommands are bench's subcommands by name; each parses its own
// arguments.
var subcommands = map[string]func(args []string) error{
	"history":             history,
	"drain":               drainCmd,
	"write":               writeCmd,
	"latency":             latencyCmd,
	"inbox":               inboxCmd,
	"console":             consoleCmd,
	"skew":                skewCmd,
	"wmsweep":             wmsweepCmd,
	"cdc":                 cdcCmd,
	"smoke":               smoke,
	"watermill-forwarder": watermillForwarderCmd, // drain's Watermill contender, run as a child process
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	run, ok := subcommands[os.Args[1]]
	if !ok {
		usage()
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage (every subcommand takes --db URL and, where it uses NATS, --broker URL; -h lists all flags):
  bench drain   [--events N] [--aggregates N] [--runs N] [--batch N] [--only raw,txbox,txbox-delete,txbox-2proc,txbox-lease,watermill,txbox-metrics,txbox-tracedrows,txbox-traced,txbox-cdc]
                [--traced-sampled PCT] [--wm-events-per-tx N] [--wm-poll D] [--wm-driver pgx|stdlib] [--wm-cpuprofile FILE] [--timeout D] [--stall D] [--relay-log LEVEL]
  bench write   [--clients N] [--duration D] [--warmup D] [--runs N] [--counters N] [--only business,handwritten,handwritten-8col,txbox,txbox-wakeup,txbox-traced] [--interleave] [--cpuprofile PREFIX]
  bench latency [--rate N]... [--duration D] [--idle D] [--variants listen,poll,default,watermill] [--poll-interval D] [--writers N] [--aggregates N]
                [--wm-poll D] [--wm-schema default|queue] [--wm-batch N] [--relay-arg ARG]...
  bench inbox   [--events N] [--aggregates N] [--batch N] [--runs N] [--only txbox,txbox-batch,handwritten] [--tx-batch N] [--double-ack]
  bench history --db URL [--history N] [--backlog N] [--batch N] [--runs N]
  bench console [--rows N] [--runs N]
  bench skew    [--events N] [--layouts 1,10,100,1000,100000,zipf] [--runs N] [--only txbox,txbox-2proc,raw-pipelined,watermill]
                [--raw-inflight N] [--batch N] [--wm-batch N] [--wm-schema default|queue] [--timeout D] [--stall D]
                [--nats-embedded] [--nats-batch fast|atomic|none] [--kafka] [--relay-log LEVEL]
  bench wmsweep [--events 100000,1000000] [--batches 100,1000,5000] [--schemas default,queue] [--runs N]
  bench cdc     [--rate N]... [--duration D] [--events N] [--aggregates N] [--write-duration D] [--runs N]
                CDC vs polling: latency (listen, cdc, cdc-tableless), drain (txbox, txbox-cdc), write path (row vs logical message)
  bench smoke   every subcommand at toy sizes (CI)`)
	os.Exit(2)
}
