package inbox

import "time"

// The defaults of Config: one source for the library and the CLI's flags.
const (
	DefaultMaxAttempts    = 10
	DefaultBackoffBase    = time.Second
	DefaultBackoffMax     = 300 * time.Second
	DefaultBatchSize      = 64
	DefaultTxBatch        = 1
	DefaultHoldFor        = 5 * time.Second
	DefaultMaxHeld        = 10000
	DefaultReplayInterval = 2 * time.Second
)
