package open

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// PublisherOptions are the broker settings the binary exposes.
type PublisherOptions struct {
	NATSStream       string
	NATSSubjects     string
	NATSCreateStream bool
	Logger           *slog.Logger
}

// AddFlags registers the publisher flags.
func (o *PublisherOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.NATSStream, "nats-stream", "TXBOX", "JetStream stream name")
	f.StringVar(&o.NATSSubjects, "nats-subjects", "outbox.>", "comma-separated subjects the stream must hold when --nats-create-stream is set")
	f.BoolVar(&o.NATSCreateStream, "nats-create-stream", false, "create or update the stream at start")
}

const brokerField = "--broker (TXBOX_BROKER)"

// CheckPublisherURL rejects a missing, malformed or unknown broker URL
// without connecting.
func CheckPublisherURL(raw string) error {
	_, err := publisherFor(raw)
	return err
}

func publisherFor(raw string) (func(context.Context, string, PublisherOptions) (broker.Publisher, error), error) {
	if raw == "" {
		return nil, &txbox.ConfigError{Field: brokerField, Reason: "missing; e.g. nats://127.0.0.1:4222"}
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, &txbox.ConfigError{Field: brokerField, Reason: fmt.Sprintf("%q is not a URL (scheme://...)", Redact(raw))}
	}
	open, ok := publishers[scheme]
	if !ok {
		return nil, &txbox.ConfigError{Field: brokerField, Reason: fmt.Sprintf("scheme %q not supported (nats)", scheme)}
	}
	return open, nil
}

// Publisher opens the broker named by raw.
func Publisher(ctx context.Context, raw string, o PublisherOptions) (broker.Publisher, error) {
	open, err := publisherFor(raw)
	if err != nil {
		return nil, err
	}
	return open(ctx, raw, o)
}

var publishers = map[string]func(context.Context, string, PublisherOptions) (broker.Publisher, error){}
