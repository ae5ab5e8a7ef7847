package faults

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Outages as long as production's: a broker away for longer than the
// relays' whole retry schedule, a stream deleted and made again, a database
// read-only for minutes, a PostgreSQL restart, and the database a handler
// writes to going away. None is the events' failure: each must end with
// nothing lost, nothing DEAD or parked, nothing applied twice and no order
// broken (the checker's Dead and Parked count what an outage wrongly
// spent).
const (
	LongBrokerOutage Kind = "broker down past the retry schedule"
	StreamRecreated  Kind = "stream deleted and made again"
	ReadOnlyLong     Kind = "read-only database for minutes"
	RestartPostgres  Kind = "PostgreSQL restart"
	HandlerDBDown    Kind = "handler's database down"
	// HeldTransaction is a transaction of another session held open over
	// the outbox, as a report or a session left idle in transaction: it
	// holds back the cleanup of dead rows while the relays claim, archive
	// and delete (docs/operations.md, "Long transactions").
	HeldTransaction Kind = "transaction held open for minutes"
)

// Long are the outages that last minutes in a long run: each runs alone
// (the schedule's other faults wait for it to end) and is not multiplied
// by the run's scale. For is how long each lasts. Every world has them
// all: its broker stops, its database turns read-only, its consumers'
// audit database is cut off.
type Long map[Kind]time.Duration

// LongFor is the length of the long outages for a run: the broker down for
// longer than the relays' whole retry schedule (relayRetry), the databases
// read-only and the handler's database away for longer than the
// consumers' (consumerRetry).
func LongFor(defaultRetry bool, brokerDown time.Duration) Long {
	if defaultRetry {
		// The default schedule (10 attempts, 1 s doubling to 300 s) spends
		// its attempts in about 8.5 to 14 minutes.
		return Long{LongBrokerOutage: brokerDown, ReadOnlyLong: 3 * time.Minute, HandlerDBDown: 2 * time.Minute, HeldTransaction: 3 * time.Minute}
	}
	return Long{LongBrokerOutage: brokerDown, ReadOnlyLong: 12 * time.Second, HandlerDBDown: 8 * time.Second, HeldTransaction: 12 * time.Second}
}

// relayRetry is the relays' retry schedule: the default one (the long run,
// whose broker outage outlasts it), or one that a CI run's outages of
// seconds outlast many times (3 attempts within about half a second).
func relayRetry(defaultRetry bool) []string {
	if defaultRetry {
		return nil
	}
	return []string{"--max-attempts", "3", "--backoff-base", "100ms", "--backoff-max", "1s", "--outage-probe-max", "2s"}
}

// WithLong inserts the long outages into an ordinary schedule made for
// d minus their total: each at a seeded place between two faults, the
// faults after it shifted by its length, so the schedule still ends within
// d and no other fault lands while it lasts.
func WithLong(seed uint64, ordinary []Fault, long Long) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x10a6))
	kinds := make([]Kind, 0, len(long))
	for k := range long {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds) // map order is random; the seed alone must decide
	out := slices.Clone(ordinary)
	for _, k := range kinds {
		i := rng.IntN(len(out) + 1)
		at := time.Duration(0)
		if i > 0 {
			at = out[i-1].At + 5*time.Second
		}
		for j := i; j < len(out); j++ {
			out[j].At += long[k] + 5*time.Second
		}
		out = slices.Insert(out, i, Fault{At: at, Kind: k, For: long[k]})
	}
	return out
}

// Total is the time the long outages take together.
func (l Long) Total() time.Duration {
	var d time.Duration
	for _, v := range l {
		d += v + 5*time.Second
	}
	return d
}

// brokerDown stops the broker for d: long past the relays' retry
// schedule, so a relay that spent attempts on the outage would send the
// backlog DEAD.
func brokerDown(w *World, d time.Duration) string {
	w.Broker.Stop()
	time.Sleep(d)
	w.Broker.Start()
	return fmt.Sprintf("down %v", d)
}

// handlerDBDown cuts the consumers' handlers off from the database they
// write to beside the inbox's (the audit database) for d: their handlers
// fail with a lost or refused connection, an outage, which must park
// nothing however long it lasts.
func handlerDBDown(w *World, d time.Duration) string {
	w.DB.AuditProxy().Cut()
	time.Sleep(d)
	w.DB.AuditProxy().Restore()
	return fmt.Sprintf("down %v", d)
}
