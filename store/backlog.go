package store

import (
	"context"
	"time"
)

// Backlog is what a relay's gauges show: the rows still to deliver, by
// status, the DEAD rows, and how long the oldest undelivered row has waited.
type Backlog struct {
	Pending    int64
	Retry      int64
	Processing int64
	Dead       int64
	// OldestAge is now - created_at of the oldest PENDING, RETRY or
	// PROCESSING row, on the database clock; 0 when there is none.
	OldestAge time.Duration
}

// Unsent is the rows the relay still has to deliver.
func (b Backlog) Unsent() int64 { return b.Pending + b.Retry + b.Processing }

// BacklogSampler is an Outbox that can sample its backlog cheaply enough to
// be polled every few seconds by a metrics collector: it reads only unsent
// and DEAD rows, through the indexes the claim uses, so its cost follows the
// backlog and never the delivered history (Stats counts SENT rows too and is
// meant for an operator's occasional look).
type BacklogSampler interface {
	Backlog(ctx context.Context) (Backlog, error)
}
