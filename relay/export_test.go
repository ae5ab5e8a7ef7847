package relay

import "context"

// RunOnce claims one batch and delivers it; it returns how many rows it
// claimed. A test seam: Run is the API.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	b, err := r.claim(ctx)
	if err != nil || len(b.recs) == 0 {
		return 0, err
	}
	return len(b.recs), r.deliver(ctx, b, nil)
}

// Config returns the effective configuration (defaults applied).
func (r *Relay) Config() Config { return r.cfg }
