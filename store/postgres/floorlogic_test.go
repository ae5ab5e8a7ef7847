package postgres

import (
	"testing"
	"time"
)

// The floor's bookkeeping, step by step, with made-up probes: a candidate
// is trusted only after a probe found its transactions ended, and applied
// only by a probe sent after that check, as min(candidate, that probe's m).
func TestFloorBookkeeping(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	f := &floorTracker{on: true, safe: noFloor, every: time.Hour, rescan: t0.Add(time.Hour)}

	// A probe from the bottom sees 100: proposed, then marked.
	if _, found, propose := f.observe(probeResult{from: noFloor, m: 100, sent: at(0), read: at(1)}); found || !propose {
		t.Fatalf("first probe: found %v propose %v", found, propose)
	}
	f.add(floorCand{m: 100, marker: 50})
	from, chk := f.get(at(2))
	if from != noFloor || chk.marker == nil || *chk.marker != 50 {
		t.Fatalf("get: %d %+v", from, chk)
	}
	// Not cleared yet: nothing moves, however high the probes see.
	f.observe(probeResult{from: from, m: 300, checked: chk.marker, sent: at(3), read: at(4)})
	if f.safe != noFloor {
		t.Fatalf("floor moved to %d before the candidate cleared", f.safe)
	}
	// Cleared by the probe read at 10; a probe sent at 9 (its snapshot may
	// predate the check) does not apply it.
	f.observe(probeResult{from: from, m: 300, cleared: true, checked: chk.marker, sent: at(5), read: at(10)})
	f.observe(probeResult{from: from, m: 300, sent: at(9), read: at(12)})
	if f.safe != noFloor {
		t.Fatalf("floor applied by a probe sent before the check: %d", f.safe)
	}
	// Sent after the check, it sees a late commit at 90: the floor is 90,
	// not the candidate's 100.
	f.observe(probeResult{from: from, m: 90, sent: at(11), read: at(13)})
	if f.safe != 90 {
		t.Fatalf("floor %d, want min(candidate 100, seen 90) = 90", f.safe)
	}
	if len(f.cands) != 0 {
		t.Fatalf("applied candidate kept: %+v", f.cands)
	}

	// A probe from an old floor (another worker's, read before the floor
	// moved) that sees a row below the floor is not a stray row.
	if _, found, _ := f.observe(probeResult{from: 95, m: 92, sent: at(20), read: at(21)}); found || f.safe != 90 {
		t.Fatalf("probe from above the floor: found %v, floor %d", found, f.safe)
	}
	// A rescan from the bottom that finds a row below the floor reports it
	// and lowers the floor.
	if below, found, _ := f.observe(probeResult{from: noFloor, m: 7, sent: at(30), read: at(31)}); !found || below != 90 || f.safe != 7 {
		t.Fatalf("rescan: found %v below %d, floor %d", found, below, f.safe)
	}
	// Candidates are proposed at most every floorCandEvery and only rising.
	f = &floorTracker{on: true, safe: noFloor, every: time.Hour, rescan: t0.Add(time.Hour)}
	if _, _, p := f.observe(probeResult{from: noFloor, m: 10, read: at(0)}); !p {
		t.Fatal("first candidate not proposed")
	}
	f.add(floorCand{m: 10, marker: 1})
	if _, _, p := f.observe(probeResult{from: noFloor, m: 20, read: at(50)}); p {
		t.Fatal("proposed again within floorCandEvery")
	}
	if _, _, p := f.observe(probeResult{from: noFloor, m: 5, read: at(500)}); p {
		t.Fatal("proposed a candidate below the last one")
	}
	// A rescan is due after `every`.
	f.every = time.Second
	f.rescan = at(1000)
	f.safe = 10
	if from, _ := f.get(at(999)); from != 10 {
		t.Fatalf("before the rescan: from %d", from)
	}
	if from, _ := f.get(at(1000)); from != noFloor {
		t.Fatalf("rescan due: from %d", from)
	}
}
