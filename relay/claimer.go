package relay

import (
	"context"

	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// claimer is one claim mode, chosen once in New from Config.Claims and
// what the store can do: by a lease written into the rows (this file), by
// the claim's open transaction (txclaim.go), or by a transaction that may
// also claim behind this relay's own batches in flight (chain.go). Run and
// deliver see only this interface and claimed.
type claimer interface {
	// kind names the mode in the relay's log.
	kind() string
	// join starts what the mode keeps for the relay's life (the split of a
	// table's aggregates between relays); leave ends it.
	join(ctx context.Context) (leave func())
	claim(ctx context.Context, limit int) (claimed, error)
}

// claimed is a mode's side of one batch: its rows, the order it keeps with
// this relay's other batches of the same aggregates (only chained claims
// have any), and how its outcome is recorded.
type claimed interface {
	records() []store.Record
	// trim takes out of lanes, into out.release, the rows that lie behind
	// another batch's rows of their aggregate.
	trim(lanes map[string][]item, out *outcome)
	// ready returns the lanes of order that may publish now and, when none
	// may, the channel to wait on (nil with none ready: no lane is left).
	// release gives a lane back whole, unpublished, and returns its size.
	ready(order []string, release func(lane string) int) ([]string, <-chan struct{})
	// laneDone says a lane will publish no more; published: all of it was.
	laneDone(lane string, published bool)
	// finish records out in the store and ends the claim.
	finish(ctx context.Context, out *outcome) error
	// close drops what the batch kept beside the store; after finish.
	close()
	// followsOwn says the batch may hold rows behind this relay's own
	// batches in flight (chained claims), whose rows then lie ahead of its
	// own in the table (gate).
	followsOwn() bool
}

func newClaimer(r *Relay) claimer {
	txc, ok := r.cfg.Store.(claimapi.TxClaimer)
	if !ok || r.cfg.Claims == ClaimLease {
		return &leaseClaimer{r: r}
	}
	t := txClaimer{r: r, txc: txc}
	if cc, ok := txc.(claimapi.ChainClaimer); ok {
		return &chainClaimer{txClaimer: t, cc: cc}
	}
	return &t
}

// unchained is the order of a batch that shares no aggregate with another
// batch in flight: nothing to wait for.
type unchained struct{}

func (unchained) trim(map[string][]item, *outcome) {}
func (unchained) ready(order []string, _ func(string) int) ([]string, <-chan struct{}) {
	return order, nil
}
func (unchained) laneDone(string, bool) {}
func (unchained) close()                {}
func (unchained) followsOwn() bool      { return false }
