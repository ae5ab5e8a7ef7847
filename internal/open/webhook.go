package open

import (
	"context"
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
			f.DurationVar(&webhookFlags.timeout, "webhook-timeout", webhookbroker.DefaultTimeout, "longest wait for one webhook request's answer")
			f.IntVar(&webhookFlags.maxInFlight, "webhook-max-in-flight", webhookbroker.DefaultMaxInFlight, "webhook requests open at once")
			f.IntVar(&webhookFlags.maxPayload, "webhook-max-payload", 0, "fail payloads over this many bytes permanently; 0: no limit")
		},
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
			if webhookFlags.timeout <= 0 || webhookFlags.maxInFlight <= 0 || webhookFlags.maxPayload < 0 {
				return nil, &txbox.ConfigError{Field: "--webhook-timeout, --webhook-max-in-flight, --webhook-max-payload", Reason: "must be positive (max payload: 0 or more)"}
			}
			return webhookbroker.Open(ctx, raw, webhookbroker.Options{
				Secret: secret, Timeout: webhookFlags.timeout, MaxInFlight: webhookFlags.maxInFlight,
				MaxPayload: webhookFlags.maxPayload, UserAgent: "txbox-relay", Logger: log,
			})
		},
	})
}
