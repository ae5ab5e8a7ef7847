package store

import (
	"context"
	"time"
)

// HorizonSampler is implemented by stores that can say how far the
// database's cleanup of old row versions is held back. A transaction left
// open elsewhere in the database (a report, a stuck session) keeps every
// row version it might still see: the outbox's churn (claimed, archived,
// deleted rows) piles up as dead rows behind it, and claims slow down
// reading past them. The relay samples it with the backlog.
type HorizonSampler interface {
	Horizon(ctx context.Context) (Horizon, error)
}

// Horizon is one sample of what holds back the cleanup of row versions.
type Horizon struct {
	// OldestTransaction is the age of the oldest transaction open in the
	// database, other than the sampler's own; 0: none. Holder describes
	// its session (id, application, client address, state).
	OldestTransaction time.Duration
	Holder            string
	// DeadRows are the row versions waiting for that cleanup: on
	// PostgreSQL the dead tuples of the outbox's tables (outbox, archive,
	// inbox) from the statistics collector; on MySQL/MariaDB the InnoDB
	// history list length, undo records of the whole server not yet
	// purged.
	DeadRows int64
}
