package testenv

import (
	"context"
	"io"
	"testing"
	"time"
)

// Open calls open with a 10-second context, fails the test on an error,
// and closes what it opened when the test ends: the one shape of every
// adapter test's "open a publisher / subscriber" helper.
func Open[T io.Closer](t testing.TB, open func(ctx context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}
