// Package deadline reads a context's deadline the way the adapters need
// it: client libraries that take no context get a timeout instead, and a
// deadline already past counts as ended before its timer fires.
package deadline

import (
	"context"
	"time"
)

// Ended is ctx.Err(), counting a deadline that has passed but whose timer
// has not fired yet (jetstream, for one, refuses such a context as an
// invalid option).
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Budget is how long a connection attempt may take: limit, or the time
// left before ctx's deadline when that is sooner. It fails with ctx's
// error, or context.DeadlineExceeded, when no time is left.
func Budget(ctx context.Context, limit time.Duration) (time.Duration, error) {
	if err := Ended(ctx); err != nil {
		return 0, err
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < limit {
		limit = time.Until(d)
	}
	if limit <= 0 {
		return 0, context.DeadlineExceeded
	}
	return limit, nil
}
