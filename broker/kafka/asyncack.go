package kafkabroker

import (
	"context"
	"fmt"

	"github.com/txbox/txbox/broker"
)

// AckAsync marks the record processed as Ack does and leaves the commit of
// its partition's watermark to the subscriber's committer, which coalesces
// the acks that arrive while a commit is out (broker.AsyncAcker). The
// inbox acknowledges after its own commit, where an ack lost to a crash
// only brings a redelivery that its inbox row absorbs; waiting for one
// offset commit per record bounded a consumer to one record per commit
// round trip (a few hundred a second to a real cluster, tens to a loaded
// in-process one). Close commits what is left.
func (d *delivery) AckAsync() error {
	s, e := d.s, d.e
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.done {
		return nil
	}
	if !s.current(e) {
		return fmt.Errorf("kafka: ack of %s/%d/%d: the partition was reassigned before the ack; its next owner delivers the record again", e.tp.topic, e.tp.partition, e.offset)
	}
	e.done, e.out, e.rec = true, nil, nil
	s.parts[e.tp].remove(e)
	if s.dirty == nil {
		s.dirty = map[topicPartition]bool{}
		s.kick = make(chan struct{}, 1)
		s.committerDone = make(chan struct{})
		go s.committer()
	}
	s.dirty[e.tp] = true
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

var _ broker.AsyncAcker = (*delivery)(nil)

// committer commits the watermarks of the partitions AckAsync marked, one
// round at a time, until the subscriber closes; a failed commit is tried
// again at the next ack (the offset stays where it was: a redelivery at
// worst).
func (s *Subscriber) committer() {
	defer close(s.committerDone)
	for range s.kick {
		if !s.commitDirty(context.Background()) {
			return
		}
	}
}

// commitDirty commits every partition AckAsync marked since the last
// round; it reports false once the subscriber is closed.
func (s *Subscriber) commitDirty(ctx context.Context) bool {
	s.mu.Lock()
	dirty := s.dirty
	s.dirty = map[topicPartition]bool{}
	closed := s.closed
	s.mu.Unlock()
	for tp := range dirty {
		if err := s.commit(ctx, tp); err != nil {
			s.log.Debug("kafka: committing acknowledged offsets failed; the records may come again", "partition", fmt.Sprintf("%s/%d", tp.topic, tp.partition), "err", err)
		}
	}
	return !closed
}

// flushAcks, at Close, stops the committer and commits what AckAsync left.
func (s *Subscriber) flushAcks(ctx context.Context) {
	s.mu.Lock()
	kick, done := s.kick, s.committerDone
	s.mu.Unlock()
	if kick == nil {
		return
	}
	select {
	case kick <- struct{}{}: // wakes it to see closed
	default:
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.commitDirty(ctx)
}
