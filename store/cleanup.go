package store

import (
	"context"
	"time"
)

// DefaultCleanupBatch is the batch size Cleanup and InboxCleanup use when
// given none.
const DefaultCleanupBatch = 1000

// Cleanup deletes SENT rows older than age, one CleanupBatch of at most
// batch rows at a time, until a batch comes back short or ctx ends. Deleting
// in bounded batches matters: one unbounded DELETE takes locks on every row
// at once and deadlocks with the relay under load
// (NServiceBus.Persistence.Sql#778). The loop lives here, once, so every
// store only has to delete one batch.
func Cleanup(ctx context.Context, o interface {
	CleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error)
}, age time.Duration, batch int) (int64, error) {
	return drain(ctx, batch, func(ctx context.Context, limit int) (int64, error) {
		return o.CleanupBatch(ctx, age, limit)
	})
}

// InboxCleanup deletes PROCESSED and SKIPPED inbox rows received before
// now-age, one InboxCleanupBatch at a time, as Cleanup does for the outbox.
func InboxCleanup(ctx context.Context, a interface {
	InboxCleanupBatch(ctx context.Context, age time.Duration, limit int) (int64, error)
}, age time.Duration, batch int) (int64, error) {
	return drain(ctx, batch, func(ctx context.Context, limit int) (int64, error) {
		return a.InboxCleanupBatch(ctx, age, limit)
	})
}

// drain calls one until a batch deletes fewer than batch rows, an error, or
// the end of ctx; it returns how many rows all batches deleted.
func drain(ctx context.Context, batch int, one func(context.Context, int) (int64, error)) (int64, error) {
	if batch <= 0 {
		batch = DefaultCleanupBatch
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := one(ctx, batch)
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(batch) {
			return total, nil
		}
	}
}
