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
// when the test ends. An options Logger left nil is Quiet: every adapter's
// options have one.
func Open[O any, C io.Closer](t testing.TB, open func(context.Context, string, O) (C, error), url string, opts O) C {
	t.Helper()
	if l := reflect.ValueOf(&opts).Elem().FieldByName("Logger"); l.IsValid() && l.IsNil() {
		l.Set(reflect.ValueOf(Quiet))
	}
	return testenv.Open(t, func(ctx context.Context) (C, error) { return open(ctx, url, opts) })
}
