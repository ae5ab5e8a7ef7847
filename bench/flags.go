package main

import (
	"flag"
	"time"
)

// cmdFlags is a subcommand's flag set (a bad flag exits, -h lists them
// all), with the flags several subcommands share, defined alike in each.
type cmdFlags struct{ *flag.FlagSet }

func newFlags(name string) cmdFlags {
	return cmdFlags{flag.NewFlagSet(name, flag.ExitOnError)}
}

// pg is --db, the PostgreSQL the subcommand measures on.
func (f cmdFlags) pg() *string { return f.String("db", defaultPG, "PostgreSQL URL") }

// services are --db and --broker: the PostgreSQL and the NATS server of a
// subcommand that delivers to NATS.
func (f cmdFlags) services() (pg, natsURL *string) {
	return f.pg(), f.String("broker", defaultNATS, "NATS URL")
}

// rates is --rate, events per second (repeat or comma-separate for
// several), def when the flag is not given.
func (f cmdFlags) rates(usage string, def ...int) *intList {
	r := &rateFlag{intList: def}
	f.Var(r, "rate", usage+" (repeat or comma-separate for several)")
	return &r.intList
}

// rateFlag is an intList whose first value given replaces the default.
type rateFlag struct {
	intList
	given bool
}

func (r *rateFlag) Set(v string) error {
	if !r.given {
		r.intList, r.given = nil, true
	}
	return r.intList.Set(v)
}

// drainLimits are --timeout and --stall, which fail a drain that takes too
// long or stops moving.
func (f cmdFlags) drainLimits() (timeout, stall *time.Duration) {
	return f.Duration("timeout", 30*time.Minute, "longest one drain may take"),
		f.Duration("stall", 2*time.Minute, "fail a drain whose stream count has not moved for this long")
}

// parse reads args into the flags; with ExitOnError a bad one has already
// exited when Parse returns, so there is no error to return.
func (f cmdFlags) parse(args []string) { _ = f.Parse(args) }
