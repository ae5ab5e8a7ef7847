package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/txbox/txbox/internal/sqlstore"
	"github.com/txbox/txbox/internal/testenv"
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

	// MariaDB's equivalents of PostgreSQL's kinds (mariadb.go), and Kafka's
	// of the full stream (kafka.go).
	KillConnection Kind = "KILL CONNECTION"
	OptimizeTable  Kind = "OPTIMIZE TABLE"
	ProduceRefused Kind = "produce refused"
)

// Minimums are the fault counts a run must reach.
type Minimums map[Kind]int

// A world's minimums (World.Minimums) are what its CI short mode must
// inject at least. On PostgreSQL and NATS: 5 relay kills, 2 consumer
// kills, 2 broker restarts, 3 pg_terminate_backend rounds, and one of each
// other kind.

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
	kills, consumerKills := 0, 0
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
			// In turn, shifted by the seed.
			consumerKills++
			i := (consumerKills + f.Arg) % len(Consumers)
			w.Kill(Consumers[i].Proc)
			time.Sleep(300 * time.Millisecond)
			w.StartConsumer(i)
			note = Consumers[i].Proc
		case RestartBroker:
			w.Broker.Stop()
			time.Sleep(1500 * time.Millisecond)
			w.Broker.Start()
		case CutNetwork:
			linkDown(w.DB.Proxy(), w.Broker.Proxy(), f.Arg, (*testenv.Proxy).Cut, 1500*time.Millisecond)
		case SlowNetwork:
			w.Broker.Proxy().SetDelay(20 * time.Millisecond)
			w.DB.Proxy().SetDelay(5 * time.Millisecond)
			time.Sleep(2 * time.Second)
			w.Broker.Proxy().SetDelay(0)
			w.DB.Proxy().SetDelay(0)
		case HalfOpen:
			linkDown(w.Broker.Proxy(), w.DB.Proxy(), f.Arg, (*testenv.Proxy).Blackhole, 2*time.Second)
		case SkewedKeys:
			w.Skew.Store(true)
			time.Sleep(5 * time.Second)
			w.Skew.Store(false)
		case LongBrokerOutage:
			note = brokerDown(w, f.For)
		case HandlerDBDown:
			note = handlerDBDown(w, f.For)
		default:
			note, err = dbFault(ctx, w, f, done[f.Kind])
			if errors.Is(err, errNotHere) {
				note, err = w.Broker.Fault(ctx, f)
			}
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

// linkDown takes a link down with down (a cut, or a black hole that keeps
// connections open) for d, then restores it: the first link, or the
// second when arg is 1.
func linkDown(first, second *testenv.Proxy, arg int, down func(*testenv.Proxy), d time.Duration) {
	p := first
	if arg == 1 {
		p = second
	}
	down(p)
	time.Sleep(d)
	p.Restore()
}

// dbFault injects a database fault, trying again (for up to contendedFor,
// a second apart) when the database refused it for locks the relays and
// consumers hold: a lock wait timeout or a deadlock, after which the
// statement took no effect. On a loaded machine such waits are likelier,
// and a run must not fall short of a fault for it.
func dbFault(ctx context.Context, w *World, f Fault, n int) (string, error) {
	start := time.Now()
	for {
		note, err := w.DB.Fault(ctx, f, n)
		if err == nil || !contended(err) || time.Since(start) > contendedFor {
			return note, err
		}
		time.Sleep(time.Second)
	}
}

// contendedFor is how long a fault whose locks are contended is tried
// again: on a loaded machine the relays' transactions may keep a lock
// from it for a while, and the fault is still the same fault later.
const contendedFor = 2 * time.Minute

// contended says err is a lock wait timeout or a deadlock (MariaDB 1205 and
// 1213, PostgreSQL 55P03 and 40P01).
func contended(err error) bool {
	return sqlstore.ErrorSays(err, "Lock wait timeout exceeded", "Deadlock found", "deadlock detected", "55P03", "40P01")
}
