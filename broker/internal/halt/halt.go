// Package halt keeps the rule a pipelining Publish follows once the way
// out broke in the middle of a call (the connection lost, no slot free
// before the deadline, the caller's context ended): the messages after that
// point are not sent and fail with the same cause, so that nothing of an
// aggregate is sent after one of its events that failed.
package halt

import (
	"context"
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker/internal/deadline"
)

// Call is one Publish call's state.
type Call struct {
	adapter string // names the adapter in the error texts
	cause   error  // what the rest of the call fails with; nil while it goes on
}

// New starts a call of the adapter named.
func New(adapter string) *Call { return &Call{adapter: adapter} }

// Skip reports whether message i is not to be sent, and then sets errs[i]
// to why: the way out broke earlier in the call, or ctx has ended, which
// breaks it.
func (c *Call) Skip(ctx context.Context, errs []error, i int) bool {
	if c.cause == nil {
		if err := deadline.Ended(ctx); err != nil {
			c.cause = txbox.Unavailable(fmt.Errorf("%s: publish: %w", c.adapter, err))
		}
	}
	if c.cause != nil {
		errs[i] = c.cause
	}
	return c.cause != nil
}

// Break makes err, an outage of the way out, what the rest of the call
// fails with, and returns it.
func (c *Call) Break(err error) error {
	c.cause = err
	return err
}
