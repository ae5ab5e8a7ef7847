package relay

import "sync"

// flight tracks this relay's batches in flight, so a claim that came back
// short can wait for the next of them to end instead of a poll interval.
type flight struct {
	mu    sync.Mutex
	n     int           // batches in flight
	ends  uint64        // batches ended so far
	ended chan struct{} // closed when the next batch ends
}

func (f *flight) start() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *flight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	f.ends++
	if f.ended != nil {
		close(f.ended)
		f.ended = nil
	}
}

// state returns, read at one instant, the batches in flight, the number of
// ends so far, and a channel closed at the next end.
func (f *flight) state() (int, uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended == nil {
		f.ended = make(chan struct{})
	}
	return f.n, f.ends, f.ended
}
