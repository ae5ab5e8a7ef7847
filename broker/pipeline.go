package broker

// OrderedPipeliner is an optional promise of a Publisher: with many
// messages of one key (aggregate) in flight at once, the broker stores them
// in slice order, and after a retryable failure of a message it stores no
// later message of that key handed to the same Publish call. The relay then
// sends a run of an aggregate's events in one round instead of one event per
// round trip: the confirmed prefix of the run counts as delivered, and a
// retryable failure sends its event to RETRY and hands the rest back, which
// keeps the order of first delivery per aggregate.
//
// A publisher that cannot promise that (a later message may be stored after
// an earlier one failed, or messages may be resent out of order) must not
// implement it, or must return false; the relay then keeps one unconfirmed
// event per aggregate.
type OrderedPipeliner interface {
	PipelinesPerKey() bool
}

// PipelinesPerKey reports whether p declares OrderedPipeliner and true.
func PipelinesPerKey(p Publisher) bool {
	op, ok := p.(OrderedPipeliner)
	return ok && op.PipelinesPerKey()
}
