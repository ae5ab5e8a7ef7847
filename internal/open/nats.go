package open

import (
	"context"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

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
			f.StringVar(&natsFlags.stream, "nats-stream", "TXBOX", "JetStream stream name")
			f.StringVar(&natsFlags.subjects, "nats-subjects", "outbox.>", "comma-separated subjects the stream must hold when --nats-create-stream is set")
			f.BoolVar(&natsFlags.createStream, "nats-create-stream", false, "create the stream at start, or add missing subjects to it")
		},
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			var subjects []string
			for _, s := range strings.Split(natsFlags.subjects, ",") {
				if s = strings.TrimSpace(s); s != "" {
					subjects = append(subjects, s)
				}
			}
			return natsbroker.Open(ctx, raw, natsbroker.Options{
				Stream: natsFlags.stream, Subjects: subjects, CreateStream: natsFlags.createStream,
				Logger: log, Name: "txbox-relay",
			})
		},
	})
}
