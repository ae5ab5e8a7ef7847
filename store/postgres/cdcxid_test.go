package postgres

import "testing"

// A transaction the log reported committed is visible only below the
// snapshot's xmax and off its running list, across an epoch boundary too.
func TestAllVisible(t *testing.T) {
	const epoch = int64(3) << 32
	for _, c := range []struct {
		xids []uint32
		xmax int64
		xip  []int64
		want bool
	}{
		{[]uint32{100}, epoch + 200, nil, true},
		{[]uint32{100}, epoch + 200, []int64{epoch + 100}, false},
		{[]uint32{200}, epoch + 200, nil, false}, // not below xmax: still running
		{[]uint32{250}, epoch + 200, nil, false},
		{[]uint32{0xFFFFFFF0}, epoch + 5, nil, true}, // previous epoch
		{[]uint32{0xFFFFFFF0}, epoch + 5, []int64{epoch - 16}, false},
		{[]uint32{3}, epoch - 10, nil, false}, // next epoch, above xmax
	} {
		if got := allVisible(c.xids, c.xmax, c.xip); got != c.want {
			t.Errorf("allVisible(%v, %d, %v) = %v, want %v", c.xids, c.xmax, c.xip, got, c.want)
		}
	}
}
