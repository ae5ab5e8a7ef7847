// Package ce rebuilds a txbox event from a received message for the
// adapters' deliveries: each collects the CloudEvents attributes its
// protocol carries, named without the binding's prefix, and hands them to
// broker.EventFromAttributes here, in one way.
package ce

import (
	"fmt"
	"maps"
	"slices"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// Attrs are a message's CloudEvents attributes by name.
type Attrs map[string]string

// Add records one attribute; a name given twice makes the message
// malformed, since either value could be the one meant.
func (a Attrs) Add(name, value string) error {
	if _, dup := a[name]; dup {
		return Malformed("attribute %s given twice", name)
	}
	a[name] = value
	return nil
}

// Event rebuilds the event from the attributes and body. contentType is
// the protocol's own content type ("" when it has none), which stands in
// for a missing datacontenttype, as the bindings allow.
func (a Attrs) Event(contentType string, body []byte) (txbox.Event, error) {
	if _, ok := a[broker.AttrDataContentType]; !ok && contentType != "" {
		a[broker.AttrDataContentType] = contentType
	}
	get := func(name string) (string, bool) {
		v, ok := a[name]
		return v, ok
	}
	return broker.EventFromAttributes(get, slices.Sorted(maps.Keys(a)), body)
}

// Malformed is the error of a message that is not a txbox CloudEvent. It
// wraps txbox.ErrPermanent: redelivery will not mend it.
func Malformed(format string, a ...any) error {
	return txbox.Permanent(fmt.Errorf("%w: not a txbox CloudEvent: %s", txbox.ErrInvalidEvent, fmt.Sprintf(format, a...)))
}
