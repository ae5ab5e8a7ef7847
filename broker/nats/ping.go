package natsbroker

import (
	"context"
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

var _ broker.Pinger = (*Publisher)(nil)

// Ping asks JetStream for the stream's info: it answers only when the
// server is reachable and the stream exists.
func (p *Publisher) Ping(ctx context.Context) error {
	if _, err := p.js.Stream(ctx, p.stream); err != nil {
		return fmt.Errorf("%w: nats: stream %s: %v", txbox.ErrBrokerUnavailable, p.stream, err)
	}
	return nil
}
