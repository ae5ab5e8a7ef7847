package store

import (
	"context"
	"time"
)

// CleanupLocker is implemented by stores that can keep cleanup to one
// session at a time for their tables, so that relays which all run cleanup
// on a schedule (txbox relay --cleanup-every) take turns instead of
// deleting side by side and doubling the load on the database.
type CleanupLocker interface {
	// LockCleanup takes the cleanup lock of the store's tables if no session
	// holds it, without waiting: ok is false when one does. The Cleaner
	// deletes on the session that holds the lock, so a lock lost with its
	// connection ends that cleanup too (its next batch fails) and two
	// cleanups never overlap. Unlock must follow an ok lock.
	LockCleanup(ctx context.Context) (c Cleaner, ok bool, err error)
}

// Cleaner deletes what Cleanup and InboxCleanup delete, under the cleanup
// lock of a CleanupLocker, until Unlock. InboxCleanupBatch fails on a store
// without an inbox table.
type Cleaner interface {
	CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error)
	InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error)
	// Unlock releases the lock; when that fails it drops the session, which
	// releases it too.
	Unlock()
}
