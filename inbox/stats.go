package inbox

import "sync/atomic"

// counters are cumulative since the consumer started.
type counters struct {
	Processed   atomic.Int64
	Duplicates  atomic.Int64
	Stale       atomic.Int64
	Failed      atomic.Int64
	Parked      atomic.Int64
	Undecodable atomic.Int64
	Replayed    atomic.Int64
	Held        atomic.Int64
	OutageWaits atomic.Int64
}

// Stats is a consumer's running totals, cumulative since it started, and
// whether its database is reachable: what Consumer.Stats returns and what
// Config.Metrics reads.
type Stats struct {
	Processed   int64 // handler ran and committed
	Duplicates  int64 // deliveries of events already processed: acknowledged and skipped
	Failed      int64 // failed handler attempts (each attempt counts)
	Parked      int64 // events parked (DEAD) after their last attempt, or refused by the store
	Undecodable int64 // messages that were not txbox events, parked raw
	Stale       int64 // events skipped by the version guard as stale
	Held        int64 // Ordered: events held back to wait for their predecessor
	Replayed    int64 // parked events applied again on an operator's replay request
	OutageWaits int64 // deliveries sent back for an outage, spending no attempt
	// DatabaseUp is false from the first failure that met an outage (the
	// consumer's database, or one its handler needs, unavailable) until a
	// delivery sent back for it gets through.
	DatabaseUp bool
}

// Stats returns a snapshot of the consumer's totals. Each field is read
// atomically; the fields are not read at one instant.
func (c *Consumer) Stats() Stats {
	k := &c.ctrs
	return Stats{
		Processed: k.Processed.Load(), Duplicates: k.Duplicates.Load(), Failed: k.Failed.Load(), Parked: k.Parked.Load(),
		Undecodable: k.Undecodable.Load(), Stale: k.Stale.Load(), Held: k.Held.Load(), Replayed: k.Replayed.Load(),
		OutageWaits: k.OutageWaits.Load(), DatabaseUp: c.out.up.Load(),
	}
}
