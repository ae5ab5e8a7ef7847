package txbox

import (
	"regexp"
	"sync"
	"testing"
	"time"
)

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// NewID makes UUIDv7 strings whose time is now, strictly increasing within
// the process (also from many goroutines at once), and unique.
func TestNewID(t *testing.T) {
	before := time.Now().UnixMilli()
	prev := ""
	for range 10000 {
		id := NewID()
		if !uuidV7.MatchString(id) {
			t.Fatalf("%q is not a UUIDv7", id)
		}
		if id <= prev {
			t.Fatalf("%q after %q: not increasing", id, prev)
		}
		prev = id
	}
	var ms int64
	for _, c := range prev[:8] + prev[9:13] {
		ms = ms<<4 | int64(hexDigit(byte(c)))
	}
	if after := time.Now().UnixMilli(); ms < before || ms > after {
		t.Fatalf("the id's time %d is outside %d..%d", ms, before, after)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ids := make([]string, 0, 2000)
			for range cap(ids) {
				ids = append(ids, NewID())
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if seen[id] {
					t.Errorf("%q made twice", id)
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}

func hexDigit(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		NewID()
	}
}
