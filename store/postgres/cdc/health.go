package cdc

import (
	"context"
	"fmt"
	"time"
)

// aliveLimit is how long the read loop (or the standby's retry loop) may
// not come round before Alive fails: its longest legitimate wait is a
// status interval or a standby retry, far below this.
func (r *Reader) aliveLimit() time.Duration {
	return 2*(r.cfg.StandbyRetry+r.cfg.StatusInterval) + 30*time.Second
}

func (r *Reader) beat() { r.beatAt.Store(time.Now().UnixNano()) }

// Alive reports whether the relay's loop goes round: reading the slot,
// waiting for delivery to catch up, or retrying as a standby.
func (r *Reader) Alive() error {
	if since := time.Since(time.Unix(0, r.beatAt.Load())); since > r.aliveLimit() {
		return fmt.Errorf("cdc relay: loop stuck for %v (limit %v)", since.Round(time.Millisecond), r.aliveLimit())
	}
	return nil
}

// Ready is the publishing relay's readiness (database, broker, oldest
// pending row, stall); see relay.Relay.Ready.
func (r *Reader) Ready(ctx context.Context) error { return r.rel.Ready(ctx) }
