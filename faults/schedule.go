package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind is one sort of fault.
type Kind string

const (
	KillRelay     Kind = "relay SIGKILL"
	KillConsumer  Kind = "consumer SIGKILL"
	RestartBroker Kind = "broker restart"
	TerminatePG   Kind = "pg_terminate_backend"
	CutNetwork    Kind = "network cut"
	SlowNetwork   Kind = "network latency"
	HalfOpen      Kind = "half-open connections"

	// Faults that are not kind to the data (harder.go).
	SkewedKeys     Kind = "skewed keys"
	TruncateOutbox Kind = "TRUNCATE RESTART IDENTITY"
	ExplicitIDs    Kind = "explicit ids"
	ManualRetry    Kind = "manual UPDATE to RETRY"
	VacuumFull     Kind = "VACUUM FULL"
	ReadOnly       Kind = "read-only database"
	StreamFull     Kind = "stream full"
	LeaseClockJump Kind = "lease clock jump"
)

// Minimums are the fault counts a run must reach.
type Minimums map[Kind]int

// ShortMinimums is what the CI short mode must inject at least.
var ShortMinimums = Minimums{KillRelay: 5, KillConsumer: 2, RestartBroker: 2, TerminatePG: 3, CutNetwork: 1, SlowNetwork: 1, HalfOpen: 1,
	SkewedKeys: 1, TruncateOutbox: 1, ExplicitIDs: 1, ManualRetry: 1, VacuumFull: 1, ReadOnly: 1, StreamFull: 1, LeaseClockJump: 1,
	StreamRecreated: 1, RestartPostgres: 1}

// Fault is one scheduled fault.
type Fault struct {
	At   time.Duration
	Kind Kind
	Arg  int           // which relay or consumer, or which link
	For  time.Duration // how long a long outage lasts (WithLong); 0 for the others
}

// Schedule spreads the minimums (times scale) over d on a seeded random
// timeline, leaving the last fifth of d quiet.
func Schedule(seed uint64, d time.Duration, min Minimums, scale int) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0xfa17))
	var kinds []Kind
	for k, n := range min {
		for range n * max(scale, 1) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds) // map order is random; the seed alone must decide
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	span := d * 4 / 5
	step := span / time.Duration(len(kinds)+1)
	out := make([]Fault, len(kinds))
	for i, k := range kinds {
		jitter := time.Duration(rng.Int64N(int64(step / 2)))
		out[i] = Fault{At: step*time.Duration(i+1) - step/4 + jitter, Kind: k, Arg: rng.IntN(2)}
	}
	return out
}

// Inject runs the schedule against w and returns the counts it did.
func Inject(ctx context.Context, w *World, faults []Fault, logf func(string, ...any)) map[Kind]int {
	done := map[Kind]int{}
	start := time.Now()
	kills := 0
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return done
		case <-time.After(time.Until(start.Add(f.At))):
		}
		var err error
		var note string
		switch f.Kind {
		case KillRelay:
			// Every third kill takes the third relay, where there is one.
			i := f.Arg
			if kills++; w.Relays() > 2 && kills%3 == 0 {
				i = 2
			}
			w.Kill(fmt.Sprintf("relay-%d", i))
			time.Sleep(time.Duration(100+f.Arg*200) * time.Millisecond)
			w.StartRelay(i)
			note = fmt.Sprintf("relay-%d", i)
		case KillConsumer:
			w.Kill(fmt.Sprintf("consumer-%d", f.Arg))
			time.Sleep(300 * time.Millisecond)
			w.StartConsumer(f.Arg)
		case RestartBroker:
			w.NATS.Kill()
			time.Sleep(1500 * time.Millisecond)
			w.NATS.Start()
		case TerminatePG:
			var n int
			err = w.Admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name IN ('txbox-relay', 'txbox-consumer')`).Scan(&n)
			if logf != nil {
				logf("terminated %d backends", n)
			}
		case CutNetwork:
			p := w.PGProxy
			if f.Arg == 1 {
				p = w.NATProxy
			}
			p.Cut()
			time.Sleep(1500 * time.Millisecond)
			p.Restore()
		case SlowNetwork:
			w.NATProxy.SetDelay(20 * time.Millisecond)
			w.PGProxy.SetDelay(5 * time.Millisecond)
			time.Sleep(2 * time.Second)
			w.NATProxy.SetDelay(0)
			w.PGProxy.SetDelay(0)
		case HalfOpen:
			p := w.NATProxy
			if f.Arg == 1 {
				p = w.PGProxy
			}
			p.Blackhole()
			time.Sleep(2 * time.Second)
			p.Restore()
		case SkewedKeys:
			skewKeys(w)
		case TruncateOutbox:
			note, err = truncateKeeping(ctx, w)
		case ExplicitIDs:
			note, err = explicitIDs(ctx, w, done[f.Kind])
		case ManualRetry:
			note, err = manualRetry(ctx, w)
		case VacuumFull:
			err = vacuumFull(ctx, w)
		case ReadOnly:
			note, err = readOnly(ctx, w)
		case StreamFull:
			note, err = streamFull(ctx, w)
		case LeaseClockJump:
			note, err = leaseClockJump(ctx, w, 5*time.Second)
		case LongBrokerOutage:
			note = brokerDown(w, f.For)
		case StreamRecreated:
			note, err = recreateStream(ctx, w)
		case ReadOnlyLong:
			note, err = setReadOnly(ctx, w, f.For)
		case RestartPostgres:
			note = restartPostgres(w)
		case HandlerDBDown:
			note = handlerDBDown(w, f.For)
		}
		if err != nil {
			// A fault that did not happen is not counted: the run then
			// falls short of its minimums and fails.
			if logf != nil {
				logf("%6.1fs %s FAILED: %v", time.Since(start).Seconds(), f.Kind, err)
			}
			continue
		}
		done[f.Kind]++
		if logf != nil {
			logf("%6.1fs %s #%d (arg %d) %s", time.Since(start).Seconds(), f.Kind, done[f.Kind], f.Arg, note)
		}
	}
	return done
}
