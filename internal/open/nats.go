package open

import (
	"context"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
)

var natsFlags struct {
	stream       string
	subjects     string
	createStream bool
}

func init() {
	registerPublisher(publisherDef{
		schemes: []string{"nats", "tls"},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&natsFlags.stream, "nats-stream", "", "JetStream stream name; empty: the stream whose subjects capture --topic (with --nats-create-stream and none: TXBOX)")
			f.StringVar(&natsFlags.subjects, "nats-subjects", "", "comma-separated subjects the stream must hold when --nats-create-stream is set; empty: the fixed leading tokens of --topic plus > (outbox.> for the default topic)")
			f.BoolVar(&natsFlags.createStream, "nats-create-stream", false, "create the stream at start, or add missing subjects to it")
		},
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			var subjects []string
			for _, s := range strings.Split(natsFlags.subjects, ",") {
				if s = strings.TrimSpace(s); s != "" {
					subjects = append(subjects, s)
				}
			}
			var topic string
			if relayTopic != "" {
				topic = SampleTopic(relayTopic)
				if len(subjects) == 0 && natsFlags.createStream {
					var err error
					if subjects, err = natsbroker.SubjectsFor(string(relayTopic)); err != nil {
						return nil, &txbox.ConfigError{Field: "--nats-subjects (TXBOX_NATS_SUBJECTS)", Reason: err.Error() + "; name the stream's subjects"}
					}
				}
			}
			return natsbroker.Open(ctx, raw, natsbroker.Options{
				Stream: natsFlags.stream, Subjects: subjects, CreateStream: natsFlags.createStream, Topic: topic,
				Logger: log, Name: "txbox-relay",
			})
		},
	})
}

// checkNATSFlags refuses a --nats-stream the server would refuse, before
// connecting: reported later, it looked like an unreachable broker.
func checkNATSFlags() error {
	if natsFlags.stream == "" {
		return nil
	}
	if err := natsbroker.ValidateStreamName(natsFlags.stream); err != nil {
		return &txbox.ConfigError{Field: "--nats-stream (TXBOX_NATS_STREAM)", Reason: err.Error()}
	}
	return nil
}
