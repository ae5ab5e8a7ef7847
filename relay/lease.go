package relay

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/txbox/txbox/store"
)

// leaseClaimer claims by lease: the rows turn PROCESSING with this batch's
// fencing token, and every mark names it.
type leaseClaimer struct {
	r   *Relay
	seq atomic.Uint64
}

func (c *leaseClaimer) kind() string                        { return "lease" }
func (c *leaseClaimer) join(context.Context) (leave func()) { return func() {} }

func (c *leaseClaimer) claim(ctx context.Context, limit int) (claimed, error) {
	lease := fmt.Sprintf("%s#%d", c.r.cfg.ID, c.seq.Add(1))
	recs, err := c.r.cfg.Store.Claim(ctx, store.ClaimRequest{Lease: lease, Limit: limit, LeaseFor: c.r.cfg.Lease})
	if err != nil {
		return nil, err
	}
	return &leaseBatch{r: c.r, lease: lease, recs: recs}, nil
}

type leaseBatch struct {
	unchained
	r     *Relay
	lease string
	recs  []store.Record
}

func (b *leaseBatch) records() []store.Record { return b.recs }

func (b *leaseBatch) finish(ctx context.Context, out *outcome) error {
	return b.r.mark(ctx, b.lease, out, b.recs)
}

// mark records a lease-held batch's outcome, one statement per kind.
func (r *Relay) mark(ctx context.Context, lease string, out *outcome, recs []store.Record) error {
	var errs []error
	if len(out.sent) > 0 {
		n, err := r.cfg.Store.MarkSent(ctx, lease, out.sent)
		if errors.Is(err, store.ErrRefused) {
			var refused []store.Failure
			n, refused, err = r.markSentIsolating(ctx, lease, out.sent, recs)
			out.failures = append(out.failures, refused...)
			n += int64(len(refused)) // not lost to another relay: marked failed below
		}
		r.ctrs.Published.Add(int64(len(out.sent)))
		r.lost(int64(len(out.sent))-n, err)
		errs = append(errs, err)
	}
	if len(out.failures) > 0 {
		n, err := r.cfg.Store.MarkFailed(ctx, lease, out.failures)
		if err == nil { // else not marked: the rows come back when their lease ends
			r.countFailures(out.failures)
		}
		r.lost(int64(len(out.failures))-n, err)
		errs = append(errs, err)
	}
	if len(out.release) > 0 {
		_, err := r.cfg.Store.Release(ctx, lease, out.release)
		r.ctrs.Released.Add(int64(len(out.release)))
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (r *Relay) lost(n int64, err error) {
	if err == nil && n > 0 {
		// The broker has these; another relay that took them over will send
		// them again. At least once still holds; the inbox absorbs the copy.
		r.ctrs.LeaseLost.Add(n)
		r.log.Warn("marks refused: lease lost to another relay", "rows", n)
	}
}
