package open

import (
	"context"
	"strings"

	"github.com/txbox/txbox/broker"
	natsbroker "github.com/txbox/txbox/broker/nats"
)

func init() {
	publishers["nats"] = func(ctx context.Context, raw string, o PublisherOptions) (broker.Publisher, error) {
		var subjects []string
		for _, s := range strings.Split(o.NATSSubjects, ",") {
			if s = strings.TrimSpace(s); s != "" {
				subjects = append(subjects, s)
			}
		}
		return natsbroker.Open(ctx, raw, natsbroker.Options{
			Stream:       o.NATSStream,
			Subjects:     subjects,
			CreateStream: o.NATSCreateStream,
			Logger:       o.Logger,
			Name:         "txbox-relay",
		})
	}
}
