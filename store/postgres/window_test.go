package postgres

import "testing"

// The window follows what the claims find in it: as wide as before while
// nothing is learnt, narrower when every window row is a candidate, at
// once as wide again when candidates turn sparse, and untouched by a
// window that held the whole backlog.
func TestWindowSizer(t *testing.T) {
	ptr := func(n int64) *int64 { return &n }
	yes, no := true, false
	var w windowSizer
	if got, want := w.size(1000, 500, 1), 500+1000*txScanFactor; got != want {
		t.Fatalf("before any claim: window %d, want %d", got, want)
	}
	// Every row beyond the held ones a candidate: 1.5 rows per row asked.
	for range 10 {
		w.observe(w.size(1000, 500, 1), 500, 1, ptr(int64(w.size(1000, 500, 1)-500)), &yes)
	}
	if got, want := w.size(1000, 500, 1), 500+1500; got != want {
		t.Fatalf("dense windows: window %d, want %d", got, want)
	}
	// A window that was not full says nothing.
	w.observe(2000, 500, 1, ptr(1), &no)
	w.observe(2000, 500, 1, nil, nil)
	if got := w.size(1000, 500, 1); got != 2000 {
		t.Fatalf("after windows that held the whole backlog: window %d, want 2000", got)
	}
	// One candidate in four rows: back to the widest window at once.
	w.observe(2000, 500, 1, ptr(375), &yes)
	if got, want := w.size(1000, 500, 1), 500+1000*txScanFactor; got != want {
		t.Fatalf("after a sparse window: window %d, want %d", got, want)
	}
	// A full window with no candidate (all busy or blocked) is the widest too.
	w = windowSizer{perCand: 1}
	w.observe(2000, 500, 1, nil, &yes)
	if got, want := w.size(1000, 500, 1), 500+1000*txScanFactor; got != want {
		t.Fatalf("after an empty full window: window %d, want %d", got, want)
	}
	// Split among members relays: the window is members times as wide, and
	// what one member finds is read per member.
	w = windowSizer{}
	for range 10 {
		win := w.size(1000, 0, 2)
		w.observe(win, 0, 2, ptr(int64(win/2)), &yes)
	}
	if got, want := w.size(1000, 0, 2), 2*1500; got != want {
		t.Fatalf("split in two, dense: window %d, want %d", got, want)
	}
	if got := (&windowSizer{}).size(10000, 15000, 1); got != maxWindow {
		t.Fatalf("window %d, want the bound %d", got, maxWindow)
	}
}
