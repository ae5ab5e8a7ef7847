package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// Chained claims (claimapi.ChainClaimer) let one aggregate's events be in
// several of this relay's batches at once: a claim takes the rows behind
// the ones its batches in flight hold, so a hot aggregate is not published
// one batch per round trip while the other workers find nothing to claim.
// The store only picks the rows; the order is kept here, per aggregate,
// with a link from each batch to the one before it:
//
//   - a batch publishes its events of an aggregate only once the earlier
//     batch has published all of its own (first delivery keeps the order),
//     and releases them unpublished if the earlier batch gave any up;
//   - it counts them as sent only if the earlier batch's rows of the
//     aggregate were all sent and committed; otherwise it releases them
//     (their copies on the broker are duplicates the inbox absorbs), so no
//     later row is ever marked sent while an earlier one is not.
//
// "Earlier" is every batch in flight when the claim started: a claim may
// treat the rows of a batch that ended meanwhile as still held (the store
// reads its held rows when the claim starts), so such a batch's outcome
// must still count.

// chainClaimer claims by transaction, behind this relay's batches in flight
// where the store finds rows there (claimapi.ChainClaimer).
type chainClaimer struct {
	txClaimer
	cc     claimapi.ChainClaimer
	chains chains
}

func (c *chainClaimer) claim(ctx context.Context, limit int) (claimed, error) {
	prior := c.chains.before()
	tx, err := c.cc.ClaimTxChained(ctx, limit)
	if err != nil {
		return nil, err
	}
	b := &chainBatch{txBatch: txBatch{r: c.r, tx: tx}, chains: &c.chains}
	if recs := tx.Records(); len(recs) > 0 {
		b.links = c.chains.join(recs, prior, tx)
		for _, l := range b.links {
			if l.prev != nil {
				c.r.ctrs.Chained.Add(1)
			}
		}
	}
	return b, nil
}

// chainBatch is a chained claim's batch: its place in each aggregate's chain.
type chainBatch struct {
	txBatch
	chains *chains
	links  map[string]*link
	// after holds the lanes free to publish: the batch before them in their
	// aggregate published all of its own (ready).
	after map[string]bool
}

// link is one batch's share of one aggregate.
type link struct {
	prev  *link // the earlier batch's link for this aggregate; nil: none
	minID int64 // the lowest id of the batch's rows of the aggregate
	// cutFrom: the batch's rows of the aggregate from this id on lie behind
	// another batch's and are released unpublished (join); 0: none.
	cutFrom int64
	ids     []int64 // the rows it publishes
	claim   claimapi.ChainedClaim
	// nexts are the links claimed behind this one (under chains.mu).
	nexts []*link
	// released: an earlier batch did not send all its rows of the
	// aggregate, so this one's are released too (in the store already).
	released atomic.Bool
	// published is closed once every event of this batch's lane was
	// published or given up; pubOK (written before) says all were published.
	published chan struct{}
	pubOK     bool
	// final is closed once the batch's outcome is committed or failed;
	// finalOK (written before) says every row of the lane counts as sent and
	// so did every earlier batch's.
	final   chan struct{}
	finalOK bool
	done    bool // published closed (owner's goroutine only)
}

// chains holds the links of each aggregate among the batches in flight,
// in the order they joined. The slices are never changed in place, so a
// copy of the map is a snapshot.
type chains struct {
	mu sync.Mutex
	m  map[string][]*link
}

// before is read before a claim starts: the links of the batches in flight
// then, which the claim's rows of the same aggregates must follow.
func (c *chains) before() map[string][]*link {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) == 0 {
		return nil
	}
	out := make(map[string][]*link, len(c.m))
	for k, l := range c.m {
		out[k] = l
	}
	return out
}

// join links a claimed batch's aggregates behind prior and adds its links.
// It runs on the claiming goroutine, before the next claim.
//
// Usually a claim's rows of an aggregate lie behind those of every earlier
// batch in flight, and the lane follows the newest of them. But the rows a
// batch releases are free again once it ends, while batches claimed
// behind it (released, their rows too) may still hold theirs; a
// claim then takes the freed rows, which lie below those. And a claim that
// read the store's held rows just before a batch released its rows may
// have taken rows behind them as if they were held. So a lane follows the
// link with the highest ids below its own (pred), and keeps only its rows
// below the lowest id of any link above (its rows from there are released
// at once: their turn comes after that link's rows). Every link below
// pred has ended or is ahead of pred in the chain.
func (c *chains) join(recs []store.Record, prior map[string][]*link, claim claimapi.ChainedClaim) map[string]*link {
	own := make(map[string]*link)
	for _, rec := range recs {
		k := laneKey(rec)
		l := own[k]
		if l == nil {
			l = &link{minID: rec.ID, claim: claim, published: make(chan struct{}), final: make(chan struct{})}
			own[k] = l
		}
		l.minID = min(l.minID, rec.ID)
		l.ids = append(l.ids, rec.ID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string][]*link)
	}
	for k, l := range own {
		var pred *link
		for _, x := range prior[k] {
			switch {
			case x.minID < l.minID:
				if pred == nil || x.minID > pred.minID {
					pred = x
				}
			case l.cutFrom == 0 || x.minID < l.cutFrom:
				l.cutFrom = x.minID
			}
		}
		if l.cutFrom != 0 {
			var keep, cut []int64
			for _, id := range l.ids {
				if id < l.cutFrom {
					keep = append(keep, id)
				} else {
					cut = append(cut, id)
				}
			}
			l.ids = keep
			claim.Release(cut)
		}
		if pred != nil {
			l.prev = pred
			pred.nexts = append(pred.nexts, l)
			if pred.released.Load() {
				c.releaseLocked(l)
			}
		}
		c.m[k] = append(c.m[k][:len(c.m[k]):len(c.m[k])], l)
	}
	return own
}

// releaseBehind releases the rows of every batch claimed behind l in its
// aggregate, now that l will not send all of its own.
func (c *chains) releaseBehind(l *link) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range l.nexts {
		c.releaseLocked(n)
	}
}

func (c *chains) releaseLocked(l *link) {
	if l.released.Swap(true) {
		return
	}
	l.claim.Release(l.ids)
	for _, n := range l.nexts {
		c.releaseLocked(n)
	}
}

// leave drops a finished batch's links.
func (c *chains) leave(own map[string]*link) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, l := range own {
		var rest []*link
		for _, x := range c.m[k] {
			if x != l {
				rest = append(rest, x)
			}
		}
		if len(rest) == 0 {
			delete(c.m, k)
		} else {
			c.m[k] = rest
		}
	}
}

// laneDone closes the lane's published once: ok says it published all its
// events. A lane that gave some up releases its rows in the store and the
// batches behind it first, so that no claim from now on takes rows behind
// them.
func (b *chainBatch) laneDone(k string, ok bool) {
	l := b.links[k]
	if l == nil || l.done {
		return
	}
	l.done = true
	if !ok {
		l.claim.Release(l.ids)
		b.chains.releaseBehind(l)
	}
	l.pubOK = ok
	close(l.published)
}

// ready splits order into the lanes that may publish now and, when none
// may, the channel to wait on. A lane may publish once the batch before it
// in its aggregate published all of its own; a lane behind one that gave
// some up is released whole, unpublished.
func (b *chainBatch) ready(order []string, release func(string) int) ([]string, <-chan struct{}) {
	if b.after == nil {
		b.after = make(map[string]bool, len(order))
	}
	var ready []string
	var waitFor <-chan struct{}
	for _, k := range order {
		if !b.after[k] {
			l := b.links[k]
			if l.released.Load() {
				b.r.ctrs.ChainReleased.Add(int64(release(k)))
				continue
			}
			if prev := l.prev; prev != nil {
				select {
				case <-prev.published:
					if !prev.pubOK {
						b.r.ctrs.ChainReleased.Add(int64(release(k)))
						continue
					}
				default:
					if waitFor == nil {
						waitFor = prev.published
					}
					continue
				}
			}
			b.after[k] = true
		}
		ready = append(ready, k)
	}
	return ready, waitFor
}

// waitChain waits for ch (an earlier batch's lane published), stop, or d.
func waitChain(ch <-chan struct{}, stop <-chan struct{}, d time.Duration) {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ch:
	case <-stop:
	case <-t.C:
	}
}

// finish ends the lanes still open (every aggregate whose rows all went to
// DEAD before publishing has no lane), waits for the outcome of each
// earlier batch its lanes follow, records its own, and passes it on to the
// batches behind.
func (b *chainBatch) finish(ctx context.Context, out *outcome) error {
	for k := range b.links {
		b.laneDone(k, true)
	}
	released := b.beforeFinish(out)
	err := b.txBatch.finish(ctx, out)
	b.finished(out, released, err)
	return err
}

// beforeFinish waits, before the batch's marks, for the outcome of each
// earlier batch its lanes follow; a lane behind one whose rows did not all
// count as sent releases its own sent rows, so none counts as sent while
// an earlier row of its aggregate is unsent.
func (b *chainBatch) beforeFinish(out *outcome) map[string]bool {
	var released map[string]bool
	for k, l := range b.links {
		if l.prev != nil {
			<-l.prev.final
		}
		if l.released.Load() || (l.prev != nil && !l.prev.finalOK) {
			if released == nil {
				released = make(map[string]bool)
			}
			released[k] = true
		}
		l.prev = nil // older links are no longer needed; let them go
	}
	if released == nil {
		return nil
	}
	kept := out.sent[:0]
	byID := recordsByID(b.tx.Records())
	for _, id := range out.sent {
		if released[laneKey(byID[id])] {
			out.release = append(out.release, id)
			b.r.ctrs.ChainReleased.Add(1)
			continue
		}
		kept = append(kept, id)
	}
	out.sent = kept
	return released
}

// finished publishes each lane's outcome to the batches behind it: a lane's
// rows all count as sent when the commit succeeded, none of them was
// released or left to retry, and every earlier batch's rows did too
// (released: the lanes beforeFinish released for that).
func (b *chainBatch) finished(out *outcome, released map[string]bool, err error) {
	notSent := make(map[int64]bool, len(out.release))
	for _, id := range out.release {
		notSent[id] = true
	}
	for _, f := range out.failures {
		if !f.Dead {
			notSent[f.ID] = true
		}
	}
	// A lane's own rows only: rows join cut off (cutFrom) lie behind
	// another batch, and the batches behind this one do not follow them.
	bad := make(map[string]bool)
	for k, l := range b.links {
		for _, id := range l.ids {
			if notSent[id] {
				bad[k] = true
				break
			}
		}
	}
	for k, l := range b.links {
		l.finalOK = err == nil && l.pubOK && !bad[k] && !released[k]
		if !l.finalOK {
			b.chains.releaseBehind(l)
		}
		close(l.final)
	}
}

// trim releases, unpublished, each lane's rows that join found lying
// behind another batch's (link.cutFrom).
func (b *chainBatch) trim(lanes map[string][]item, out *outcome) {
	for k, l := range b.links {
		if l.cutFrom == 0 {
			continue
		}
		lane := lanes[k]
		n := 0
		for n < len(lane) && lane[n].rec.ID < l.cutFrom {
			n++
		}
		for _, it := range lane[n:] {
			out.release = append(out.release, it.rec.ID)
		}
		b.r.ctrs.ChainReleased.Add(int64(len(lane) - n))
		lanes[k] = lane[:n]
	}
}

// close drops the batch's links once it ended.
func (b *chainBatch) close() { b.chains.leave(b.links) }

// followsOwn: a chained batch's rows may lie behind this relay's batches
// in flight.
func (b *chainBatch) followsOwn() bool { return true }
