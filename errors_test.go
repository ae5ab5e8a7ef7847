package txbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/txbox/txbox"
)

// TestPermanentAndUnavailable: both wrappers are matchable with errors.Is,
// keep the cause reachable, pass nil through and do not wrap twice.
func TestPermanentAndUnavailable(t *testing.T) {
	cause := fmt.Errorf("nats: publish: %w", io.EOF)
	for _, c := range []struct {
		name     string
		wrap     func(error) error
		sentinel error
		other    error
		msg      string
	}{
		{"Permanent", txbox.Permanent, txbox.ErrPermanent, txbox.ErrBrokerUnavailable, "nats: publish: EOF"},
		{"Unavailable", txbox.Unavailable, txbox.ErrBrokerUnavailable, txbox.ErrPermanent, "txbox: broker unavailable: nats: publish: EOF"},
		{"DatabaseUnavailable", txbox.DatabaseUnavailable, txbox.ErrDatabaseUnavailable, txbox.ErrBrokerUnavailable, "txbox: database unavailable: nats: publish: EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.wrap(cause)
			if !errors.Is(err, c.sentinel) || !errors.Is(err, io.EOF) || errors.Is(err, c.other) {
				t.Fatalf("%v: Is(sentinel)=%v Is(cause)=%v Is(other)=%v", err, errors.Is(err, c.sentinel), errors.Is(err, io.EOF), errors.Is(err, c.other))
			}
			if err.Error() != c.msg {
				t.Fatalf("message %q, want %q", err, c.msg)
			}
			if again := c.wrap(err); again != err {
				t.Fatalf("wrapped twice: %v", again)
			}
			if c.wrap(nil) != nil {
				t.Fatal("nil must stay nil")
			}
			wrapped := fmt.Errorf("outer: %w", err)
			if !errors.Is(wrapped, c.sentinel) {
				t.Fatal("lost behind another wrap")
			}
			var target interface{ Timeout() bool }
			_ = errors.As(err, &target) // must not panic on the multi-unwrap
		})
	}
	for _, err := range []error{txbox.Unavailable(cause), txbox.DatabaseUnavailable(cause), fmt.Errorf("handler: %w", txbox.DatabaseUnavailable(cause))} {
		if !txbox.IsOutage(err) {
			t.Errorf("IsOutage(%v) = false", err)
		}
	}
	for _, err := range []error{cause, txbox.Permanent(cause), nil} {
		if txbox.IsOutage(err) {
			t.Errorf("IsOutage(%v) = true", err)
		}
	}
	if err := txbox.Unavailable(context.DeadlineExceeded); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline lost: %v", err)
	}
}
