package relay

import (
	"context"

	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// txClaimer claims by the claim's open transaction (claimapi.TxClaimer): the
// row locks are the reservation, and the outcome is written and committed
// in that transaction.
type txClaimer struct {
	r   *Relay
	txc claimapi.TxClaimer
}

func (c *txClaimer) kind() string { return "transaction" }

// join splits the table's aggregates with the other relays on it where the
// store can (claimapi.Splitter), so their claims do not meet each other's rows
// in flight. Lease claims never split: they are the mode for connection
// poolers, which cannot keep a member's session lock.
func (c *txClaimer) join(ctx context.Context) (leave func()) {
	sp, ok := c.r.cfg.Store.(claimapi.Splitter)
	if !ok {
		return func() {}
	}
	leave, err := sp.Split(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.r.log.Warn("cannot split the aggregates with other relays of the table; claiming them all", "err", err)
		}
		return func() {}
	}
	return leave
}

func (c *txClaimer) claim(ctx context.Context, limit int) (claimed, error) {
	tx, err := c.txc.ClaimTx(ctx, limit)
	if err != nil {
		return nil, err
	}
	return &txBatch{r: c.r, tx: tx}, nil
}

type txBatch struct {
	unchained
	r  *Relay
	tx claimapi.Claim
}

func (b *txBatch) records() []store.Record { return b.tx.Records() }

// finish records the outcome and commits; released rows are simply not
// named. If the commit fails nothing is recorded: the rows come back
// unchanged and are delivered again.
func (b *txBatch) finish(ctx context.Context, out *outcome) error {
	r := b.r
	var err error
	if itx, ok := b.tx.(claimapi.IsolatingClaim); ok {
		byID := recordsByID(b.tx.Records())
		err = itx.FinishIsolating(ctx, out.sent, out.failures, func(id int64, err error) store.Failure {
			f := r.refusedMark(byID[id], err)
			out.failures = append(out.failures, f)
			return f
		})
	} else {
		err = b.tx.Finish(ctx, out.sent, out.failures)
	}
	r.ctrs.Published.Add(int64(len(out.sent)))
	r.ctrs.Released.Add(int64(len(out.release)))
	if err != nil {
		return err
	}
	r.countFailures(out.failures)
	return nil
}
