package inbox

import (
	"context"

	"github.com/txbox/txbox/broker"
)

// HandleBatch processes deliveries as Run does with one receive's worth (a
// test seam: Run is the API).
func (c *Consumer) HandleBatch(ctx context.Context, ds []broker.Delivery) { c.handleBatch(ctx, ds) }

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.withDefaults()
	return c
}
