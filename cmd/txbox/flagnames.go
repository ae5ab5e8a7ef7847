package main

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/relay"
)

// configFlags maps the library's configuration field names to the flags
// that set them: an operator reads "--batch-size (TXBOX_BATCH_SIZE)", never
// a Go field.
var configFlags = map[string]string{
	"BatchSize":           "batch-size",
	"Workers":             "workers",
	"PollInterval":        "poll-interval",
	"IdlePollMax":         "idle-poll-max",
	"Lease":               "lease",
	"PublishTimeout":      "publish-timeout",
	"MaxAttempts":         "max-attempts",
	"BackoffBase":         "backoff-base",
	"BackoffMax":          "backoff-max",
	"OutageProbeMax":      "outage-probe-max",
	"MaxPendingAge":       "max-pending-age",
	"StallAfter":          "stall-after",
	"LongTransactionWarn": "long-transaction-warn",
	"MetricsInterval":     "metrics-interval",
	"DeadBlocks":          "dead-blocks",
	"Claims":              "claims",
	"ID":                  "relay-id",
	"Source":              "source",
	"Topic":               "topic",
	"Tables.Schema":       "schema",
	"Tables.Outbox":       "outbox-table",
	"Tables.Inbox":        "inbox-table",
	// NATS publisher options.
	"Options.Stream":       "nats-stream",
	"Options.Topic":        "topic",
	"Options.CreateStream": "nats-create-stream",
	"Options.Subjects":     "nats-subjects",
}

var fieldWord = regexp.MustCompile(`\b(Tables\.(Schema|Outbox|Inbox)|Options\.(Stream|Topic|CreateStream|Subjects)|BatchSize|Workers|PollInterval|IdlePollMax|Lease|PublishTimeout|MaxAttempts|BackoffBase|BackoffMax|OutageProbeMax|MaxPendingAge|StallAfter|LongTransactionWarn|MetricsInterval|DeadBlocks)\b`)

// withFlagNames rewrites a *txbox.ConfigError that names a library field
// so that it names the flag and its variable instead, in the field and in
// the reason ("at most half of Lease" becomes "at most half of --lease").
func withFlagNames(err error) error {
	var ce *txbox.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	flag, ok := configFlags[ce.Field]
	if !ok {
		return err
	}
	reason := fieldWord.ReplaceAllStringFunc(ce.Reason, func(w string) string { return "--" + configFlags[w] })
	return &txbox.ConfigError{Field: flagField(flag), Reason: reason}
}

func flagField(flag string) string { return fmt.Sprintf("--%s (%s)", flag, envName(flag)) }

// rejectZeroRelayFlags refuses 0 or an empty value where the library would
// quietly read it as "use the default": given on purpose, it is a mistake
// (a batch of 0 rows, a relay with no workers). Flags where 0 has a
// meaning say so in their help.
func rejectZeroRelayFlags(cfg relay.Config, topic string) error {
	for _, c := range []struct {
		flag string
		zero bool
		rule string
	}{
		{"batch-size", cfg.BatchSize == 0, "1..10000"},
		{"workers", cfg.Workers == 0, "1..64"},
		{"max-attempts", cfg.MaxAttempts == 0, "1 or more"},
		{"lease", cfg.Lease == 0, "at least 100ms"},
		{"poll-interval", cfg.PollInterval == 0, "at least 1ms"},
		{"backoff-base", cfg.BackoffBase == 0, "positive"},
		{"backoff-max", cfg.BackoffMax == 0, "positive"},
		{"outage-probe-max", cfg.OutageProbeMax == 0, "at least 10ms"},
		{"metrics-interval", cfg.MetricsInterval == 0, "at least 10ms"},
		{"source", cfg.Source == "", "not empty"},
	} {
		if c.zero {
			return &txbox.ConfigError{Field: flagField(c.flag), Reason: fmt.Sprintf("0 or empty is not a value here: want %s", c.rule)}
		}
	}
	if topic == "" {
		return &txbox.ConfigError{Field: flagField("topic"), Reason: "empty: want a template such as outbox.{aggregate_type}.{event_type}"}
	}
	return nil
}
