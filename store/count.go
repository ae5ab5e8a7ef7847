package store

import (
	"context"
	"time"
)

// Counter counts the rows a cleanup would delete, exactly, so that
// `--dry-run` and the confirmation prompt tell the operator the truth (the
// rows a replay or purge would change are Outbox.Count's). Every store in
// this module implements it; storetest proves the counts match what the
// commands then change.
type Counter interface {
	// CountCleanup counts what Cleanup(ctx, age, ...) would delete now.
	CountCleanup(ctx context.Context, age time.Duration) (int64, error)
	// CountInboxCleanup counts what InboxCleanup(ctx, age, ...) would
	// delete now.
	CountInboxCleanup(ctx context.Context, age time.Duration) (int64, error)
}
