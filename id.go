package txbox

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// idClock keeps the ids of one process strictly increasing: the time part
// of each (milliseconds, and 12 bits of the millisecond's fraction) is
// above the one before, even when the clock stands still or steps back.
var idClock struct {
	sync.Mutex
	last int64 // milliseconds << 12 | fraction
}

// NewID returns a new UUIDv7 string (RFC 9562): time-ordered, so ids sort
// roughly by creation and index well. The 48-bit Unix time in milliseconds
// is followed by 12 bits of the millisecond's fraction, so the ids one
// process makes sort in the order it made them; the remaining 62 bits are
// random (crypto/rand). Lower-case, 36 characters:
// 0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b.
func NewID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (it crashes the program instead)
	nano := time.Now().UnixNano()
	milli := nano / 1e6
	t := milli<<12 | (nano-milli*1e6)>>8 // the fraction in 256 ns steps: 0..3906
	idClock.Lock()
	if t <= idClock.last {
		t = idClock.last + 1
	}
	idClock.last = t
	idClock.Unlock()
	milli, frac := t>>12, t&0xfff
	for i := range 6 {
		u[i] = byte(milli >> (40 - 8*i))
	}
	u[6] = 0x70 | byte(frac>>8) // version 7
	u[7] = byte(frac)
	u[8] = 0x80 | u[8]&0x3f // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
