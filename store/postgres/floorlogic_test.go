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
	if !f.observe(probeResult{from: noFloor, m: 100, sent: at(0), read: at(1)}) {
		t.Fatal("first probe: not proposed")
	}
	f.add(floorCand{m: 100, marker: 50})
	from, chk, _ := f.get(at(2))
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

	// Probes never lower the floor: one whose claim read an older, lower
	// floor may see a row below it that was sent since.
	f.observe(probeResult{from: 80, m: 85, sent: at(20), read: at(21)})
	if f.safe != 90 {
		t.Fatalf("a probe from an older floor moved it to %d", f.safe)
	}
	// Candidates are proposed at most every floorCandEvery and only rising.
	f = &floorTracker{on: true, safe: noFloor, every: time.Hour, rescan: t0.Add(time.Hour)}
	if !f.observe(probeResult{from: noFloor, m: 10, read: at(0)}) {
		t.Fatal("first candidate not proposed")
	}
	f.add(floorCand{m: 10, marker: 1})
	if f.observe(probeResult{from: noFloor, m: 20, read: at(50)}) {
		t.Fatal("proposed again within floorCandEvery")
	}
	if f.observe(probeResult{from: noFloor, m: 5, read: at(500)}) {
		t.Fatal("proposed a candidate below the last one")
	}
}

// The look below the floor is due every `every`, one at a time, and not
// while there is no floor; a row it finds lowers the floor and drops the
// candidates.
func TestFloorRescanBookkeeping(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	f := &floorTracker{on: true, safe: noFloor, every: time.Second, rescan: at(1000)}
	if _, _, r := f.get(at(1000)); r {
		t.Fatal("rescan started with no floor to look below")
	}
	f.safe = 100
	if _, _, r := f.get(at(999)); r {
		t.Fatal("rescan started early")
	}
	if from, _, r := f.get(at(1000)); !r || from != 100 {
		t.Fatalf("rescan due: started %v, claim from %d (claims keep the floor)", r, from)
	}
	if _, _, r := f.get(at(1001)); r {
		t.Fatal("a second rescan started while one runs")
	}
	// Nothing below: the next one is due `every` after this one ended.
	if _, found := f.rescanned(at(1500), 10*time.Millisecond, nil); found {
		t.Fatal("found a row in an empty result")
	}
	if _, _, r := f.get(at(2499)); r {
		t.Fatal("rescan due before every had passed since the last ended")
	}
	if _, _, r := f.get(at(2500)); !r {
		t.Fatal("rescan not due after every")
	}
	f.cands = []floorCand{{m: 150, marker: 9}}
	low := int64(7)
	if below, found := f.rescanned(at(2600), 0, &low); !found || below != 100 || f.safe != 7 || len(f.cands) != 0 {
		t.Fatalf("row 7 below floor 100: found %v below %d, floor %d, cands %+v", found, below, f.safe, f.cands)
	}
	// A result that is no longer below the floor (lowered meanwhile) is
	// not reported again.
	f.looking = true
	low = 50
	if _, found := f.rescanned(at(2700), 0, &low); found || f.safe != 7 {
		t.Fatalf("row 50 with floor 7: found %v, floor %d", found, f.safe)
	}
	// A look that took 20 ms is not repeated before 100 x 20 ms = 2 s.
	f.looking = true
	f.rescanned(at(3000), 20*time.Millisecond, nil)
	if _, _, r := f.get(at(4999)); r {
		t.Fatal("a look that took 20 ms repeated within 2 s")
	}
	if _, _, r := f.get(at(5000)); !r {
		t.Fatal("rescan not due 2 s after a 20 ms look")
	}
	// One that ran into its 5-minute timeout repeats within maxRescanWait,
	// not 100 x 5 minutes later.
	f.looking = true
	f.rescanned(at(6000), 5*time.Minute, nil)
	if _, _, r := f.get(at(6000).Add(maxRescanWait)); !r {
		t.Fatal("rescan not due maxRescanWait after a 5-minute look")
	}
}

// A new file node (TRUNCATE) resets the floor and voids the claim that read
// from it; a claim sent with a floor before a reset is void too, even when
// its probe reads the new node after another probe reported it.
func TestFloorRewrittenBookkeeping(t *testing.T) {
	f := &floorTracker{on: true, safe: noFloor, every: time.Hour}
	if f.rewritten(probeResult{from: noFloor, node: 7}) {
		t.Fatal("the first node seen voided a claim")
	}
	f.safe, f.cands = 200, []floorCand{{m: 300}}
	if f.rewritten(probeResult{from: 200, node: 7}) {
		t.Fatal("the same node voided a claim")
	}
	gen := f.gen
	if !f.rewritten(probeResult{from: 200, node: 8, gen: gen}) {
		t.Fatal("a claim from the floor, with a new node, not voided")
	}
	if f.safe != noFloor || len(f.cands) != 0 || f.gen == gen {
		t.Fatalf("not reset: floor %d, candidates %v, gen %d", f.safe, f.cands, f.gen)
	}
	if !f.rewritten(probeResult{from: 200, node: 8, gen: gen}) {
		t.Fatal("a claim sent with the old floor before the reset, probed after it, not voided")
	}
	if f.rewritten(probeResult{from: noFloor, node: 8, gen: gen}) {
		t.Fatal("a claim without a floor voided")
	}
	if f.rewritten(probeResult{from: noFloor, node: 8, gen: f.gen}) || f.node != 8 {
		t.Fatalf("after the reset: node %d", f.node)
	}
}
