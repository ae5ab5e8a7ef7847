package open

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/redact"
)

// publisherDef is one broker adapter as the binary knows it: its URL
// schemes, its flags, and how to open it. Each adapter registers itself
// from its own file in this package.
type publisherDef struct {
	schemes []string
	flags   func(f *pflag.FlagSet)
	// check, when set, refuses flag values the adapter would refuse,
	// without connecting; it runs before open.
	check func() error
	open  func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error)
}

var publishers []publisherDef

func registerPublisher(d publisherDef) { publishers = append(publishers, d) }

// AddPublisherFlags registers every adapter's flags.
func AddPublisherFlags(f *pflag.FlagSet) {
	for _, d := range publishers {
		if d.flags != nil {
			d.flags(f)
		}
	}
}

const brokerField = "--broker (TXBOX_BROKER)"

// CheckPublisherURL rejects a missing, malformed or unknown broker URL
// without connecting.
func CheckPublisherURL(raw string) error {
	_, err := publisherFor(raw)
	return err
}

func publisherFor(raw string) (publisherDef, error) {
	if raw == "" {
		return publisherDef{}, &txbox.ConfigError{Field: brokerField, Reason: "missing; e.g. nats://127.0.0.1:4222"}
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return publisherDef{}, &txbox.ConfigError{Field: brokerField, Reason: fmt.Sprintf("%q is not a URL (scheme://...)", redact.URL(raw))}
	}
	var known []string
	for _, d := range publishers {
		if slices.Contains(d.schemes, scheme) {
			return d, nil
		}
		known = append(known, d.schemes...)
	}
	slices.Sort(known)
	return publisherDef{}, &txbox.ConfigError{Field: brokerField, Reason: fmt.Sprintf("scheme %q not supported (%s)", scheme, strings.Join(known, ", "))}
}

// Publisher opens the broker named by raw.
func Publisher(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
	d, err := publisherFor(raw)
	if err != nil {
		return nil, err
	}
	if d.check != nil {
		if err := d.check(); err != nil {
			return nil, err
		}
	}
	return d.open(ctx, raw, log)
}

// CheckBrokerFlags checks the flags of the adapter brokerURL selects that
// can be checked without connecting. A URL no adapter takes is not its
// concern (CheckPublisherURL's).
func CheckBrokerFlags(brokerURL string) error {
	d, err := publisherFor(brokerURL)
	if err != nil || d.check == nil {
		return nil
	}
	return d.check()
}
