package adaptertest

import (
	"context"
	"io"
	"reflect"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
)

// Open opens a publisher or subscriber with open (an adapter's Open or
// OpenSubscriber), url and opts, fails the test on an error and closes it
// when the test ends. An options Logger left nil is Quiet.
func Open[O any, C io.Closer](t testing.TB, open func(context.Context, string, O) (C, error), url string, opts O) C {
	t.Helper()
	quiet(&opts)
	return testenv.Open(t, func(ctx context.Context) (C, error) { return open(ctx, url, opts) })
}

// Opening is open(ctx, url, opts) as a check of its error, for a test of
// what Open refuses: what it opened anyway is closed. An options Logger
// left nil is Quiet.
func Opening[O any, C io.Closer](open func(context.Context, string, O) (C, error), url string, opts O) func(context.Context) error {
	quiet(&opts)
	return func(ctx context.Context) error {
		c, err := open(ctx, url, opts)
		if err == nil {
			_ = c.Close()
		}
		return err
	}
}

// quiet sets the Logger field of *opts, which every adapter's options
// have, to Quiet when it is nil.
func quiet[O any](opts *O) {
	if l := reflect.ValueOf(opts).Elem().FieldByName("Logger"); l.IsValid() && l.IsNil() {
		l.Set(reflect.ValueOf(Quiet))
	}
}
