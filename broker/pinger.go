package broker

import "context"

// Pinger is a Publisher that can check, without publishing, that its broker
// answers. A relay with nothing to publish uses it to keep its readiness
// and its broker_up gauge true to the broker; optional.
type Pinger interface {
	Ping(ctx context.Context) error
}
