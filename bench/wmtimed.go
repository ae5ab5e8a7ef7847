package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// timedPublisher wraps the forwarder's NATS publisher to split its wall
// time: how long the forwarder spends inside Publish (one synchronous
// JetStream publish, waiting for its PubAck, per message) against the
// time between its first and last message. The rest is reading the SQL
// topic (query, unmarshal, offset ack) and the router's own work. The
// forwarder publishes one message at a time, so the sums do not overlap.
type timedPublisher struct {
	message.Publisher
	mu          sync.Mutex
	n           int
	inside      time.Duration
	first, last time.Time
}

func (p *timedPublisher) Publish(topic string, msgs ...*message.Message) error {
	t := time.Now()
	err := p.Publisher.Publish(topic, msgs...)
	end := time.Now()
	p.mu.Lock()
	if p.n == 0 {
		p.first = t
	}
	p.n += len(msgs)
	p.inside += end.Sub(t)
	p.last = end
	p.mu.Unlock()
	return err
}

// report prints the split to stderr.
func (p *timedPublisher) report() {
	p.mu.Lock()
	defer p.mu.Unlock()
	span := p.last.Sub(p.first)
	fmt.Fprintf(os.Stderr, "watermill-forwarder: %d messages in %v (first to last publish); inside Publish (PubAck round trips) %v = %.0f%%; outside (SQL topic reads, unwrap, router) %v\n",
		p.n, span.Round(time.Millisecond), p.inside.Round(time.Millisecond), 100*p.inside.Seconds()/max(span.Seconds(), 1e-9), (span - p.inside).Round(time.Millisecond))
}
