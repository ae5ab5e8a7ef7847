package postgres

import (
	"math"
	"sync"
)

// windowSizer sizes a transaction claim's window (queries/window.sql) from
// what the last claims found in theirs. Each window row costs the claim
// time whether it yields a candidate or not, so a window much wider than
// the claim needs is waste; one too narrow comes up short and runs the
// fallback (txClaim.more). The sizer learns how many window rows, beyond
// the rows this store holds, it takes to find one candidate (the rows per
// candidate), and sizes the next window for the limit with a margin.
//
// It only ever narrows the window below the fixed size used before it
// learnt anything (txScanFactor rows per candidate): a claim that finds
// few candidates raises the estimate back at once.
type windowSizer struct {
	mu      sync.Mutex
	perCand float64 // window rows per candidate; 0: nothing learnt yet
}

const (
	// windowMargin is how much wider than the estimate the window is, so
	// that an ordinary variation in what it holds does not make it short.
	windowMargin = 1.5
	// windowLearn weighs a claim's observation against what was learnt.
	windowLearn = 0.5
)

// size is the window for a claim of limit rows while this store holds
// held rows, among members relays (split.go).
func (w *windowSizer) size(limit, held, members int) int {
	w.mu.Lock()
	per := w.perCand
	w.mu.Unlock()
	factor := float64(txScanFactor)
	if per > 0 {
		factor = min(factor, per*windowMargin)
	}
	n := held + int(math.Ceil(float64(limit)*factor))
	return min(n*members, maxWindow)
}

// observe takes what a claim found in its window of window rows: cands
// candidates (nil: not known, the claim returned no rows), whether the
// window was full (nil: not known), with held rows held and members
// relays. A window that was not full held the whole backlog: how many
// candidates it had says nothing of the rows per candidate.
func (w *windowSizer) observe(window, held, members int, cands *int64, full *bool) {
	if full == nil || !*full {
		return
	}
	rows := float64(window)/float64(members) - float64(held)
	if rows <= 0 {
		return
	}
	per := float64(txScanFactor) // no candidate: as wide as it may be
	if cands != nil && *cands > 0 {
		per = min(rows/float64(*cands), float64(txScanFactor))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.perCand == 0 || per > w.perCand {
		// A sparser window is believed at once: a short claim costs the
		// fallback, a wide one only time.
		w.perCand = per
		return
	}
	w.perCand += windowLearn * (per - w.perCand)
}
