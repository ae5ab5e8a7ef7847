package inbox_test

import (
	"testing"

	"github.com/txbox/txbox/inbox"
)

func TestWithDefaults(t *testing.T) {
	c := inbox.Config{}.WithDefaults()
	if c.MaxAttempts != inbox.DefaultMaxAttempts || c.BackoffBase != inbox.DefaultBackoffBase || c.BackoffMax != inbox.DefaultBackoffMax ||
		c.BatchSize != inbox.DefaultBatchSize || c.TxBatch != inbox.DefaultTxBatch || c.HoldFor != inbox.DefaultHoldFor ||
		c.MaxHeld != inbox.DefaultMaxHeld || c.ReplayInterval != inbox.DefaultReplayInterval || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
}
