package faults

import (
	"context"

	"github.com/txbox/txbox/internal/testenv"
)

// Broker is the world's broker, a server of the run's own, with a fault
// proxy in front of it for the relays and the consumers.
type Broker interface {
	// Kind is the broker's URL scheme: nats or kafka.
	Kind() string
	// URL is what the relays and the consumers connect to, through the
	// proxy.
	URL() string
	Proxy() *testenv.Proxy
	// RelayArgs are the relays' flags of this broker.
	RelayArgs() []string
	// ConsumerEnv tells a consumer process where to subscribe (see
	// openSubscriber).
	ConsumerEnv() []string
	// Stop and Start are the broker restart: stopped, then started again
	// on the same port with what it stored.
	Stop()
	Start()
	// Read returns every copy the broker stored, read straight from it
	// (never through the proxy), each aggregate's in the order stored.
	Read(ctx context.Context) ([]streamMsg, error)
	// Diagnose describes the consumers' durables as the broker sees them
	// (pending, unacknowledged, redelivered), for the report of events not
	// applied; "" where there is nothing to say.
	Diagnose(ctx context.Context) string

	// Minimums are this broker's fault kinds and how many a short run
	// injects at least; Fault injects one of them (not the restart: Stop
	// and Start), or returns errNotHere.
	Minimums() Minimums
	Fault(ctx context.Context, f Fault) (note string, err error)
}

type streamMsg struct{ id string }
