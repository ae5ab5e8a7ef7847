package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A claim reads the outbox's unsent index from its lowest id. Delivered
// rows leave the table, but their index entries stay until VACUUM removes
// them, and a claim walks every one of them: with autovacuum off, or
// behind a long history between two autovacuum runs, that is thousands of
// index pages per claim. The floor is an id below which no row is unsent,
// so the claim's index scan can start there.
//
// A row below the lowest unsent id a claim sees can still appear later: its
// transaction took the id from the sequence earlier and commits later. So a
// candidate floor m, the lowest unsent id (or the sequence's next id) seen by
// one statement, is trusted only once every transaction that may hold a
// lower id has ended, and then only as far as a fresh look confirms:
//
//  1. At time t a probe sees m. Every id below m was handed out before t.
//  2. A transaction gets its xid on its first write, microseconds after
//     its first nextval; a probe at least floorGap after t reads the
//     snapshot's xmax, the next xid: every transaction that holds an id
//     below m has an xid below this marker.
//  3. A probe whose snapshot's xmin is at or above the marker sees all of
//     those transactions ended, and their rows committed or gone. Its own
//     lowest unsent id m2 covers the late ones, so min(m, m2) is safe.
//
// Ids must come from the table's identity sequence with CACHE 1 (the
// default): a cached range hands out low ids late, and an explicit id can be
// anything. With a cached sequence or no sequence the floor stays off.
// Replay gives a replayed row a new id for the same reason. Every
// floorRescan one claim starts from the bottom again: a safety net that finds a row
// below the floor (and says so in the log) should one appear anyway.
type floorTracker struct {
	mu      sync.Mutex
	on      bool
	safe    int64
	cands   []floorCand // oldest first, m ascending
	rescan  time.Time   // next claim from 0
	gap     time.Duration
	every   time.Duration
	checked bool // the sequence was looked at
}

type floorCand struct {
	m      int64
	at     time.Time
	marker int64 // 0: not set yet
}

const (
	floorGap       = time.Second
	floorRescan    = time.Minute
	maxFloorCands  = 64
	floorCandEvery = 100 * time.Millisecond
)

// setup looks at the id sequence once: the floor needs CACHE 1 and a
// positive increment.
func (s *Store) floorSetup(ctx context.Context) error {
	f := &s.floor
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.checked {
		return nil
	}
	var seq *string
	var cache, incr int64
	err := s.pool.QueryRow(ctx, `SELECT q.seqrelid::regclass::text, q.seqcache, q.seqincrement
		FROM pg_sequence q WHERE q.seqrelid = pg_get_serial_sequence($1, 'id')::regclass`, s.q.table).Scan(&seq, &cache, &incr)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		s.log.Info("txbox: claims read the outbox from its first id: its id column has no sequence", "table", s.q.table)
	case err != nil:
		return fmt.Errorf("postgres: claim: looking up the id sequence: %w", err)
	case cache != 1 || incr <= 0:
		s.log.Info("txbox: claims read the outbox from its first id: its id sequence caches ids or counts down",
			"table", s.q.table, "sequence", *seq, "cache", cache, "increment", incr)
	default:
		f.on = true
		s.q.floorProbe = fmt.Sprintf(s.q.floorProbe, *seq)
	}
	if f.gap == 0 {
		f.gap, f.every = floorGap, floorRescan
	}
	f.rescan = time.Now().Add(f.every)
	f.safe = noFloor
	f.checked = true
	return nil
}

// noFloor is below every id, also ids written by hand.
const noFloor = math.MinInt64

// get returns the floor for the next claim: noFloor when it is off or a
// rescan is due.
func (f *floorTracker) get(now time.Time) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return noFloor
	}
	if !now.Before(f.rescan) {
		f.rescan = now.Add(f.every)
		return noFloor
	}
	return f.safe
}

// observe takes one probe's result: the lowest unsent id at or above the
// floor used (from) and the snapshot's xmin and xmax. It reports a row
// found below the floor, which the rules above say cannot exist.
func (f *floorTracker) observe(from, m, xmin, xmax int64, now time.Time) (below int64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m < f.safe {
		// Only a claim from below the floor (a rescan) can see this.
		below, ok = f.safe, true
		f.safe = m
		f.cands = f.cands[:0]
	}
	for i := range f.cands {
		if f.cands[i].marker == 0 && now.Sub(f.cands[i].at) >= f.gap {
			f.cands[i].marker = xmax
		}
	}
	for len(f.cands) > 0 && f.cands[0].marker != 0 && xmin >= f.cands[0].marker {
		if c := min(f.cands[0].m, m); c > f.safe && from <= f.safe {
			f.safe = c
		}
		f.cands = f.cands[1:]
	}
	n := len(f.cands)
	if n < maxFloorCands && (n == 0 || (m > f.cands[n-1].m && now.Sub(f.cands[n-1].at) >= floorCandEvery)) {
		f.cands = append(f.cands, floorCand{m: m, at: now})
	}
	return below, ok
}
