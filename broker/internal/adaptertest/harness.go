package adaptertest

import (
	"context"
	"testing"

	"github.com/txbox/txbox/broker"
)

// NewPublisher is a brokertest.Harness.NewPublisher that opens with open
// (an adapter's Open), url and opts. An options Logger left nil is Quiet.
func NewPublisher[O any, P broker.Publisher](open func(context.Context, string, O) (P, error), url string, opts O) func(context.Context, *testing.T) broker.Publisher {
	quiet(&opts)
	return func(ctx context.Context, t *testing.T) broker.Publisher {
		p, err := open(ctx, url, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// NewSubscriber is a brokertest.Harness.NewSubscriber that opens with open
// (an adapter's OpenSubscriber), url and the options opts gives for the
// group and topic. An options Logger left nil is Quiet.
func NewSubscriber[O any, S broker.Subscriber](open func(context.Context, string, O) (S, error), url string, opts func(group, topic string) O) func(context.Context, *testing.T, string, string) broker.Subscriber {
	return func(ctx context.Context, t *testing.T, group, topic string) broker.Subscriber {
		o := opts(group, topic)
		quiet(&o)
		s, err := open(ctx, url, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}
