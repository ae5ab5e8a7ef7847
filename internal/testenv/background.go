package testenv

import (
	"context"
	"testing"
)

// Go runs run (a relay's or a consumer's Run, a tap's read loop) in a
// goroutine until stop is called or the test ends: stop cancels run's
// context and waits for it to return, so nothing it does outlives the
// tables and servers the test's other cleanups remove. stop may be called
// more than once; run's error is dropped, a test checks what run did.
func Go(t testing.TB, run func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}
