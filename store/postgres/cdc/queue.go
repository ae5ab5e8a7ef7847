package cdc

import "sync/atomic"

// queue carries decoded transactions from the reader to the delivery
// goroutine. It is bounded in events, not items: a small transaction is
// one item of one event and many fit, a bulk write comes as parts of
// BatchSize events and only a few are held, so the relay's memory does not
// grow with the size of the transactions it reads.
type queue struct {
	items  chan item
	events atomic.Int64  // events in items
	limit  int64         // the reader waits while events >= limit
	taken  chan struct{} // a wake-up for a waiting reader: events went down
}

func newQueue(batch int) *queue {
	return &queue{items: make(chan item, 256), limit: int64(4 * batch), taken: make(chan struct{}, 1)}
}

// full reports whether the reader must wait for taken before adding.
func (q *queue) full() bool { return q.events.Load() >= q.limit }

// added counts an item the reader put in items.
func (q *queue) added(it item) { q.events.Add(int64(len(it.changes))) }

// took counts an item the delivery goroutine took out of items.
func (q *queue) took(it item) {
	q.events.Add(-int64(len(it.changes)))
	select {
	case q.taken <- struct{}{}:
	default:
	}
}
