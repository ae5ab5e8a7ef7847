package open

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
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
			f.BoolVar(&natsFlags.createStream, "nats-create-stream", false, "create the stream at start when it is missing; add subjects to an existing stream only when --nats-subjects names them (a stream that does not capture --topic is refused, exit 2)")
		},
		check: checkNATSFlags,
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
						return nil, &txbox.ConfigError{Field: flagField("nats-subjects"), Reason: err.Error() + "; name the stream's subjects"}
					}
				}
			}
			opts := natsbroker.Options{
				Stream: natsFlags.stream, Subjects: subjects, CreateStream: natsFlags.createStream, Topic: topic,
				Connection: natsbroker.Connection{Logger: log, Name: "txbox-relay"},
			}
			if natsFlags.createStream && natsFlags.subjects == "" && topic != "" {
				return openNoImplicitSubjects(ctx, raw, opts)
			}
			return natsbroker.Open(ctx, raw, opts)
		},
	})
}

// openNoImplicitSubjects is --nats-create-stream without --nats-subjects:
// it creates a missing stream, but does not add subjects to a stream that
// exists. Those subjects would come from the --topic alone, and a mistyped
// --topic would widen a production stream for good (an INFO line was all
// that said so) while every event went to subjects no consumer reads,
// marked SENT. Extending a stream is asked for by naming the subjects.
//
//   - The stream exists and captures the topic: it is used as it is.
//   - No such stream: it is created.
//   - It exists and does not capture the topic: refused, exit 2.
func openNoImplicitSubjects(ctx context.Context, raw string, opts natsbroker.Options) (broker.Publisher, error) {
	use := opts
	use.CreateStream = false
	p, err := natsbroker.Open(ctx, raw, use)
	if err == nil || !errors.Is(err, txbox.ErrConfig) {
		return p, err // captured as it is, or the server is not there
	}
	target := opts.Stream
	if target == "" {
		target = natsbroker.DefaultStream
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	probe, err := natsbroker.Open(ctx, raw, natsbroker.Options{Stream: target, Connection: natsbroker.Connection{Logger: quiet, Name: opts.Name}})
	switch {
	case err != nil && errors.Is(err, txbox.ErrConfig):
		return natsbroker.Open(ctx, raw, opts) // no such stream: create it
	case err != nil:
		return nil, err
	}
	defer probe.Close()
	held := ""
	if js, err := jetstream.New(probe.Conn()); err == nil {
		if st, err := js.Stream(ctx, target); err == nil {
			held = " (subjects " + strings.Join(st.CachedInfo().Config.Subjects, ", ") + ")"
		}
	}
	want, _ := natsbroker.SubjectsFor(string(relayTopic))
	return nil, &txbox.ConfigError{Field: flagField("nats-create-stream"), Reason: fmt.Sprintf(
		"stream %q exists%s and does not capture %q, a subject of --topic %q: a mistyped --topic? --nats-create-stream adds subjects to an existing stream only when they are named: give --nats-subjects %s to add them, or fix --topic, or name another stream with --nats-stream",
		target, held, opts.Topic, string(relayTopic), strings.Join(want, ","))}
}

// checkNATSFlags refuses a --nats-stream the server would refuse, before
// connecting: reported later, it looked like an unreachable broker.
func checkNATSFlags() error {
	if natsFlags.stream == "" {
		return nil
	}
	if err := natsbroker.ValidateStreamName(natsFlags.stream); err != nil {
		return &txbox.ConfigError{Field: flagField("nats-stream"), Reason: err.Error()}
	}
	return nil
}
