package relay

import (
	"sync/atomic"
	"time"

	"github.com/txbox/txbox/store"
)

// counters are cumulative since the relay started.
type counters struct {
	Claimed   atomic.Int64 // rows claimed
	Published atomic.Int64 // rows confirmed by the broker
	Retried   atomic.Int64 // rows sent to RETRY, an attempt spent
	Deferred  atomic.Int64 // rows sent to RETRY by an outage, no attempt spent
	Dead      atomic.Int64 // rows sent to DEAD
	Held      atomic.Int64 // rows held behind a DEAD one (deadblock.go)
	Released  atomic.Int64 // rows released unpublished
	LeaseLost atomic.Int64 // marks refused because another relay took the row
	Errors    atomic.Int64 // store errors in the loop
	LastClaim atomic.Int64 // unix nanoseconds of the last successful claim

	IdleWaits     atomic.Int64 // short claims with nothing of this relay in flight
	BatchWaits    atomic.Int64 // short claims that waited for a batch of this relay to end
	ChainWaits    atomic.Int64 // batches that waited for an earlier batch's events of an aggregate
	Chained       atomic.Int64 // lanes claimed behind an earlier batch of their aggregate
	ChainReleased atomic.Int64 // rows released because an earlier batch of their aggregate did not send its own

	// Time spent per phase, in nanoseconds, summed over batches.
	ClaimNanos   atomic.Int64
	PublishNanos atomic.Int64
	MarkNanos    atomic.Int64
}

// Stats is a relay's running totals, cumulative since it started, and its
// last sampled state: what Relay.Stats returns and what Config.Metrics
// reads.
type Stats struct {
	// Publish outcomes: Published (the broker confirmed), Retried (row to
	// RETRY, an attempt spent), Deferred (row to RETRY for an outage of
	// the way out, no attempt spent), Dead (row to DEAD), Held (row held
	// behind its aggregate's DEAD one: Config.DeadBlocks).
	Published, Retried, Deferred, Dead, Held int64
	// Claimed rows; Released: claimed rows handed back unpublished;
	// LeaseLost: marks refused because another relay took the rows over.
	Claimed, Released, LeaseLost int64
	Errors                       int64     // store errors in the loop
	LastClaim                    time.Time // of the last successful claim; zero before the first

	// What short claims waited for: IdleWaits counts waits for the poll
	// interval or a wake-up with nothing of this relay's in flight;
	// BatchWaits counts waits for one of its own batches to end (held
	// rows become claimable then), bounded by the poll interval. A
	// backlog drains with BatchWaits only.
	IdleWaits, BatchWaits int64

	// Time spent per phase, summed over batches: where a relay's time goes
	// (claims run one at a time; publishes and marks of up to Workers
	// batches overlap).
	ClaimTime, PublishTime, MarkTime time.Duration

	// Backlog is the last successful sample from the database, taken at
	// SampledAt (zero: none yet, or the store cannot sample its backlog).
	Backlog   store.Backlog
	SampledAt time.Time
	// Horizon is the last sample of what holds back the database's
	// cleanup of dead rows (zero: none yet, or the store cannot tell).
	Horizon store.Horizon
	// Blocked is the last sample of the rows held behind DEAD ones
	// (Config.DeadBlocks; zero: none, or the store cannot hold rows).
	Blocked store.Blocked
	// LastPublish is when the broker last confirmed a message (zero: not
	// yet).
	LastPublish time.Time
	// BrokerUp: the broker takes publishes (false until the first publish
	// or ping succeeded, and during an outage). DestinationsDown counts the
	// destinations refusing publishes for an outage of their own while the
	// broker takes others.
	BrokerUp         bool
	DestinationsDown int
	// DatabaseUp: the relay's claims and backlog samples succeed (false
	// until the first success and from a failure to the next success).
	DatabaseUp bool
	// Ready is the last readiness verdict (Relay.Ready).
	Ready bool
}

// Stats returns a snapshot of the relay's totals and state. Each field is
// read atomically; the fields are not read at one instant.
func (r *Relay) Stats() Stats {
	c := &r.ctrs
	s := Stats{
		Claimed: c.Claimed.Load(), Published: c.Published.Load(), Retried: c.Retried.Load(), Deferred: c.Deferred.Load(), Dead: c.Dead.Load(), Held: c.Held.Load(),
		Released: c.Released.Load(), LeaseLost: c.LeaseLost.Load(), Errors: c.Errors.Load(),
		IdleWaits: c.IdleWaits.Load(), BatchWaits: c.BatchWaits.Load(),
		ClaimTime: time.Duration(c.ClaimNanos.Load()), PublishTime: time.Duration(c.PublishNanos.Load()),
		MarkTime: time.Duration(c.MarkNanos.Load()),
	}
	if ns := c.LastClaim.Load(); ns != 0 {
		s.LastClaim = time.Unix(0, ns)
	}
	r.obs.state(&s)
	return s
}
