package brokertest

import "github.com/txbox/txbox/broker"

// Capabilities is what a broker guarantees, as its adapter's harness
// declares it: the suite runs exactly the cases they allow and logs a
// reason for each it skips. Nothing in production reads them, so they live
// here, beside the cases that check them.
type Capabilities struct {
	OrderPerKey  bool // messages with one key (aggregate id) arrive in publish order
	Persistent   bool // a confirmed message survives a broker restart
	NativeDedupe bool // the broker drops a second publish with the same event id
	Redelivery   bool // an unacknowledged delivery comes back
	MaxPayload   int  // bytes; 0 = unknown
	// PipelinesPerKey: the publisher declares broker.OrderedPipeliner
	// (many messages of one key in flight, stored in order, nothing of the
	// key stored after a retryable failure).
	PipelinesPerKey bool
}

func (h Harness) caps(p broker.Publisher) Capabilities { return h.Capabilities(p) }
