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
	Gaps        atomic.Int64
	OutageWaits atomic.Int64
}

// Stats is a snapshot of a consumer's counters, cumulative since it started.
type Stats struct {
	Processed   int64 // handler ran and committed
	Duplicates  int64 // already processed: acknowledged and skipped
	Stale       int64 // dropped by the version guard
	Failed      int64 // handler errors (each attempt)
	Parked      int64 // events parked after MaxAttempts
	Undecodable int64 // messages that were not txbox events, parked raw
	Replayed    int64 // parked events run again on request
	Gaps        int64 // Ordered: events sent back to wait for their predecessor
	OutageWaits int64 // deliveries sent back for an outage, spending no attempt
}

// Stats returns a snapshot of the consumer's counters. Each field is read
// atomically; the fields are not read at one instant.
func (c *Consumer) Stats() Stats {
	k := &c.ctrs
	return Stats{
		Processed: k.Processed.Load(), Duplicates: k.Duplicates.Load(), Stale: k.Stale.Load(), Failed: k.Failed.Load(),
		Parked: k.Parked.Load(), Undecodable: k.Undecodable.Load(), Replayed: k.Replayed.Load(), Gaps: k.Gaps.Load(),
		OutageWaits: k.OutageWaits.Load(),
	}
}
