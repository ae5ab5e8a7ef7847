package relay

import "context"

// RunOnce claims one batch and delivers it; it returns how many rows it
// claimed. A test seam: Run is the API.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	b, err := r.claim(ctx)
	if err != nil || len(b.recs) == 0 {
		return 0, err
	}
	defer b.c.close()
	return len(b.recs), r.deliver(ctx, b, nil)
}

// Config returns the effective configuration (defaults applied).
func (r *Relay) Config() Config { return r.cfg }

// ChainStats is what chained claims did (chain.go): lanes claimed behind an
// earlier batch of this relay, batches that waited for such a batch, and
// rows released because one did not send its own. Internals, so not in
// Stats.
type ChainStats struct{ Chained, ChainWaits, ChainReleased int64 }

func (r *Relay) ChainStats() ChainStats {
	c := &r.ctrs
	return ChainStats{c.Chained.Load(), c.ChainWaits.Load(), c.ChainReleased.Load()}
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.withDefaults()
	return c
}
