package open

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	webhookbroker "github.com/txbox/txbox/broker/webhook"
)

var webhookFlags struct {
	secret      string
	timeout     time.Duration
	maxInFlight int
	maxPayload  int
}

const webhookSecretEnv = "TXBOX_WEBHOOK_SECRET"

func init() {
	registerPublisher(publisherDef{
		schemes: []string{"http", "https"},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&webhookFlags.secret, "webhook-secret", "", "secret that signs webhook requests (Standard Webhooks; \"whsec_<base64>\" or at least 16 bytes); prefer "+webhookSecretEnv+" to the command line")
			f.DurationVar(&webhookFlags.timeout, "webhook-timeout", webhookbroker.DefaultAckTimeout, "longest wait for one webhook request's answer")
			f.IntVar(&webhookFlags.maxInFlight, "webhook-max-in-flight", webhookbroker.DefaultMaxInFlight, "webhook requests open at once")
			f.IntVar(&webhookFlags.maxPayload, "webhook-max-payload", 0, "fail payloads over this many bytes permanently; 0: no limit")
		},
		check: checkWebhookFlags,
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			secret := webhookFlags.secret
			if secret == "" {
				secret = os.Getenv(webhookSecretEnv)
			}
			if secret == "" {
				return nil, &txbox.ConfigError{Field: "--webhook-secret (" + webhookSecretEnv + ")", Reason: "required for http(s):// brokers: every request is signed"}
			}
			if _, err := webhookbroker.Key(secret); err != nil {
				return nil, &txbox.ConfigError{Field: "--webhook-secret (" + webhookSecretEnv + ")", Reason: err.Error()}
			}
			return webhookbroker.Open(ctx, raw, webhookbroker.Options{
				Secret: secret, AckTimeout: webhookFlags.timeout, MaxInFlight: webhookFlags.maxInFlight,
				MaxPayload: webhookFlags.maxPayload, Name: "txbox-relay", Logger: log,
			})
		},
	})
}

// checkWebhookFlags refuses bad numbers before anything connects.
func checkWebhookFlags() error {
	switch {
	case webhookFlags.timeout <= 0:
		return &txbox.ConfigError{Field: flagField("webhook-timeout"), Reason: fmt.Sprintf("%v: want a positive duration", webhookFlags.timeout)}
	case webhookFlags.maxInFlight <= 0:
		return &txbox.ConfigError{Field: flagField("webhook-max-in-flight"), Reason: fmt.Sprintf("%d: want 1 or more", webhookFlags.maxInFlight)}
	}
	return notNegative("webhook-max-payload", webhookFlags.maxPayload, "want a number of bytes, or 0 for no limit")
}
