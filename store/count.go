package store

import (
	"context"
	"time"
)

// Counter counts the rows an admin command would change, exactly, so that
// `--dry-run` and the confirmation prompt tell the operator the truth.
// Every store in this module implements it; storetest proves the counts
// match what the commands then change.
type Counter interface {
	// Count counts outbox rows matching f: the outbox table, and the
	// archive of SENT rows when f.Status is empty or SENT. f.Limit is
	// ignored.
	Count(ctx context.Context, f Filter) (int64, error)
	// CountCleanup counts what Cleanup(ctx, age, ...) would delete now.
	CountCleanup(ctx context.Context, age time.Duration) (int64, error)
	// CountInboxCleanup counts what InboxCleanup(ctx, age, ...) would
	// delete now.
	CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error)
}
