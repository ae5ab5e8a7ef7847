package relay

// maxPipelinedRun bounds the events of one aggregate in one publish round with a
// pipelining publisher: enough to hide the round trip, small enough that a
// failure early in the run wastes little.
const maxPipelinedRun = 1000

// runLen is how many events at the head of lane one round publishes: one,
// or with a publisher that keeps per-key order in flight
// (broker.OrderedPipeliner), the run of events bound for the head's topic,
// since order holds only within one destination.
func (r *Relay) runLen(lane []item) int {
	if !r.pipelined || r.blocks.blocks(lane[0].rec.AggregateType) {
		return 1
	}
	n := 1
	for n < len(lane) && n < maxPipelinedRun && lane[n].msg.Topic == lane[0].msg.Topic {
		n++
	}
	return n
}

// settleRun records the results of the first n events of lane and returns
// what is left of the lane to publish, and whether the lane is parked (then
// nothing is left). The confirmed events before the first failure that
// keeps the event (an outage, or an attempt with attempts left) are SENT;
// that one goes to RETRY and every later event of the lane is released,
// even one the broker confirmed: it must not count as delivered before the
// failed one (its copy, if the broker kept it, is a duplicate the inbox
// absorbs). A permanent failure, or one past MaxAttempts, goes DEAD and does
// not block the aggregate.
func (r *Relay) settleRun(lane []item, n int, errs []error, out *outcome) ([]item, bool) {
	for j, it := range lane[:n] {
		if errs[j] == nil {
			out.sent = append(out.sent, it.rec.ID)
			continue
		}
		f := r.failure(it.rec, errs[j], it.msg.Topic)
		out.failures = append(out.failures, f)
		if f.Dead && r.blocks.blocks(it.rec.AggregateType) {
			// Blocking dead letters: the aggregate waits for this row's
			// replay or purge; its later rows are held (deadblock.go).
			for _, later := range lane[j+1:] {
				out.failures = append(out.failures, hold(later.rec, it.rec.EventID))
			}
			return nil, true
		}
		if !f.Dead {
			// The aggregate waits for this row: hand its later rows back.
			for _, later := range lane[j+1:] {
				out.release = append(out.release, later.rec.ID)
			}
			return nil, true
		}
	}
	return lane[n:], false
}
