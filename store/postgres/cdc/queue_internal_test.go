package cdc

import "testing"

// The queue holds a bounded number of events, however they are cut into
// items, and a reader waiting for room is woken when an item is taken.
func TestQueueBoundsEvents(t *testing.T) {
	q := newQueue(10) // room for 40 events
	part := item{changes: make([]change, 10)}
	for i := range 4 {
		if q.full() {
			t.Fatalf("full after %d parts of 10", i)
		}
		q.items <- part
		q.added(part)
	}
	if !q.full() {
		t.Fatal("not full with 40 events queued")
	}
	q.items <- item{} // a position marker takes no room
	q.added(item{})
	q.took(<-q.items)
	select {
	case <-q.taken:
	default:
		t.Fatal("taking an item did not wake the reader")
	}
	if q.full() {
		t.Fatal("still full after a part was taken")
	}
}
