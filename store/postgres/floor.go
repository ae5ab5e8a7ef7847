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
// candidate floor is trusted only once every transaction that may hold a
// lower id has ended, and then only as far as a fresh look confirms:
//
//  1. A claim's probe sees m, the lowest unsent id at or above the floor it
//     read from (or the sequence's next id). Every id below m was handed out
//     before, to a transaction that was committed then (and is seen) or was
//     running.
//  2. After that claim's transaction ended, on the same connection, one
//     statement of its own transaction takes a new xid (the marker: every
//     xid handed out before is lower), lists the virtual transaction ids
//     running (every transaction holds its own from its start, also before
//     its first write gives it an xid) and notes the time.
//  3. A later probe checks the candidate: its snapshot's xmin is at or above
//     the marker, none of those virtual transactions runs, and no
//     transaction was prepared (two-phase commit) since the candidate: every
//     transaction that may hold an id below m has ended. The virtual ids
//     cover every ordinary transaction; the xmin condition is for prepared
//     ones, which keep their xid but give up their virtual id at PREPARE
//     (untested here: the test server has max_prepared_transactions = 0).
//  4. A probe that starts after that check sees all of their rows, and its
//     own lowest unsent id m2 covers them: min(m, m2) is safe.
//
// No timing assumption is involved. Ids must come from the table's identity
// sequence with CACHE 1 (the default): a cached range hands out low ids
// late, and an explicit id can be anything; with a cached sequence the floor
// stays off. Replay gives a replayed row a new id for the same reason. Every
// floorRescan (or 100 times as long as the last one took, if that is
// longer) a query of its own, off the claim path, looks below the floor
// from the bottom: a safety net that finds a row below the floor (and says
// so in the log, and lowers the floor) should one appear anyway. It reads
// every dead index entry below the floor, which on a long unvacuumed
// history takes a second or more: a claim waiting for it would stall
// delivery for that long. A transaction that stays open holds the floor
// where it is, as it holds back VACUUM: claims then cost what they cost
// without a floor.
type floorTracker struct {
	mu      sync.Mutex
	on      bool
	safe    int64
	cands   []floorCand // oldest first, m ascending
	lastAdd time.Time
	rescan  time.Time // next look below the floor
	every   time.Duration
	looking bool // a look below the floor is running
	checked bool // the sequence was looked at
	// gen counts the times the sequence was found set back or the table
	// rewritten; what a probe sent before that saw is of no use after it.
	gen uint64
	// node is the table's file node as the last probe saw it (0: not seen).
	node int64
}

// floorCand is a candidate floor and what must end before it is trusted.
type floorCand struct {
	m       int64
	marker  int64
	since   time.Time // database clock
	vxids   []string
	cleared time.Time // when a probe found all of it ended; zero: not yet
	gen     uint64    // floorTracker.gen when its probe was sent
}

// floorCheck is what a claim's probe is asked to check: the oldest
// candidate's conditions (copies; nil marker: none).
type floorCheck struct {
	marker *int64
	vxids  []string
	since  *time.Time
}

const (
	floorRescan    = time.Minute
	rescanCost     = 100
	maxRescanWait  = time.Hour // a look that ran into its timeout still repeats
	maxFloorCands  = 16
	floorCandEvery = 200 * time.Millisecond
)

// noFloor is below every id, also ids written by hand.
const noFloor = math.MinInt64

// floorSetup looks at the id sequence once: the floor needs CACHE 1, a
// positive increment, no CYCLE, and the right to read the sequence.
// sequenceSQL reads the id sequence of table $1 and what floorSetup checks
// of it.
const sequenceSQL = `SELECT q.seqrelid::regclass::text, q.seqcache, q.seqincrement, q.seqcycle,
	has_sequence_privilege(q.seqrelid, 'SELECT')
FROM pg_sequence q WHERE q.seqrelid = pg_get_serial_sequence($1, 'id')::regclass`

func (s *Store) floorSetup(ctx context.Context) error {
	f := &s.floor
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.checked {
		return nil
	}
	var seq *string
	var cache, incr int64
	var cycle, canRead bool
	err := s.pool.QueryRow(ctx, sequenceSQL, s.q.table).Scan(&seq, &cache, &incr, &cycle, &canRead)
	off := func(why string, args ...any) {
		s.log.Info("txbox: claims read the outbox from its first id: "+why, append([]any{"table", s.q.table}, args...)...)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		off("its id column has no sequence")
	case err != nil:
		return fmt.Errorf("postgres: claim: looking up the id sequence: %w", err)
	case cache != 1 || incr <= 0 || cycle:
		off("its id sequence caches ids, counts down or cycles", "sequence", *seq, "cache", cache, "increment", incr, "cycle", cycle)
	case !canRead:
		off("this role may not read its id sequence (GRANT SELECT on it)", "sequence", *seq)
	default:
		f.on = true
		s.q.floorProbe = fmt.Sprintf(s.q.floorProbe, *seq)
	}
	if f.every == 0 {
		f.every = floorRescan
	}
	f.rescan = time.Now().Add(f.every)
	f.safe = noFloor
	f.checked = true
	return nil
}

// get returns the floor for the next claim (noFloor when it is off), what
// its probe is to check, and whether the caller is to start a look below
// the floor (Store.startRescan).
func (f *floorTracker) get(now time.Time) (floor int64, chk floorCheck, rescan bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return noFloor, floorCheck{}, false
	}
	if len(f.cands) > 0 && f.cands[0].cleared.IsZero() {
		c := f.cands[0]
		chk = floorCheck{marker: &c.marker, vxids: c.vxids, since: &c.since}
	}
	if !f.looking && f.safe != noFloor && !now.Before(f.rescan) {
		f.looking = true
		rescan = true
	}
	return f.safe, chk, rescan
}

// rescanned takes the result of a look below the floor that took `took`:
// the lowest unsent id found there, if any. It reports whether that row
// lies below the floor still, and lowers the floor to it. The next look
// is due `every` later, or rescanCost times what this one took if that is
// longer (at most maxRescanWait): behind a long unvacuumed history the look
// reads every dead entry below the floor, and it should not cost more than
// 1% of the database's time.
func (f *floorTracker) rescanned(now time.Time, took time.Duration, low *int64) (below int64, found bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looking = false
	f.rescan = now.Add(min(max(f.every, rescanCost*took), maxRescanWait))
	if low == nil || *low >= f.safe { // none, or the floor was lowered since
		return 0, false
	}
	below, found = f.safe, true
	f.safe = *low
	f.cands = f.cands[:0]
	return below, found
}

// probeResult is what one claim's probe saw.
type probeResult struct {
	from    int64     // the floor the claim read from
	m       int64     // lowest unsent id at or above from, else the sequence's next id
	cleared bool      // the checked candidate's transactions have all ended
	checked *int64    // the marker of the candidate checked, nil: none
	sent    time.Time // when the claim was sent: its snapshot is later
	read    time.Time // when the probe's answer was read: its check is earlier
	next    int64     // the sequence's next id; 0: not read
	gen     uint64    // floorTracker.gen when the claim was sent
	node    int64     // the table's file node; 0: not read
}

// generation is read before a claim is sent; see probeResult.gen.
func (f *floorTracker) generation() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen
}

// observe takes one probe's result and reports whether the claim should
// propose m as a candidate. A probe may see a row below the floor: the
// floor moved after its claim read it, and the row was sent in between.
func (f *floorTracker) observe(p probeResult) (propose bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.gen != f.gen {
		return false // sent before the sequence was set back
	}
	if p.next > 0 && f.safe != noFloor && p.next < f.safe {
		// The sequence was set back (TRUNCATE ... RESTART IDENTITY, setval):
		// the ids it hands out now lie below the floor, and a claim reading
		// from the floor would not see them until the next look below it.
		// Every candidate is void: the ids below it are being handed out
		// again, by transactions no marker covers.
		f.safe = noFloor
		f.cands = f.cands[:0]
		f.gen++
		return false
	}
	// Step 4: a candidate cleared by an earlier probe whose check finished
	// before this probe was sent.
	for len(f.cands) > 0 && !f.cands[0].cleared.IsZero() && p.sent.After(f.cands[0].cleared) {
		if c := min(f.cands[0].m, p.m); c > f.safe && p.from <= f.safe {
			f.safe = c
		}
		f.cands = f.cands[1:]
	}
	// Step 3.
	if p.cleared && p.checked != nil && len(f.cands) > 0 && f.cands[0].marker == *p.checked && f.cands[0].cleared.IsZero() {
		f.cands[0].cleared = p.read
	}
	propose = f.fits(p.m) && p.read.Sub(f.lastAdd) >= floorCandEvery
	if propose {
		f.lastAdd = p.read
	}
	return propose
}

// rewritten takes the table's file node a probe read and reports whether
// its claim must be voided. TRUNCATE gives the table a new file node (so do
// VACUUM FULL and CLUSTER). A TRUNCATE ... RESTART IDENTITY that puts the
// undelivered rows back with new ids from 1 can leave more of them than
// the floor: the sequence then ends above the floor and does not look set
// back, yet a claim reading from the floor misses the kept rows below it
// and takes an aggregate's later rows before its earlier ones. So a new
// file node resets the floor, and a claim that read from a floor is voided
// when the node changed or the floor was reset since it was sent (its
// floor may predate the TRUNCATE). The claim and the probe run in one
// transaction, whose lock on the table keeps a TRUNCATE from committing in
// between: a claim that saw the truncated table reads the new node.
func (f *floorTracker) rewritten(p probeResult) (void bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.gen != f.gen {
		return p.from != noFloor
	}
	if p.node == 0 || p.node == f.node {
		return false
	}
	first := f.node == 0
	f.node = p.node
	if first {
		return false
	}
	f.safe = noFloor
	f.cands = f.cands[:0]
	f.gen++
	return p.from != noFloor
}

// add records a candidate once its marker is taken (step 2).
func (f *floorTracker) add(c floorCand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.gen == f.gen && f.fits(c.m) {
		f.cands = append(f.cands, c)
	}
}

// fits reports whether m can join the candidates: room left, above the
// floor, above the last candidate. Callers hold mu.
func (f *floorTracker) fits(m int64) bool {
	n := len(f.cands)
	return n < maxFloorCands && m > f.safe && (n == 0 || m > f.cands[n-1].m)
}
