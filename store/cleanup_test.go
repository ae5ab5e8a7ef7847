package store

import (
	"context"
	"errors"
	"testing"
)

// TestDrain: the one cleanup loop stops at the first short batch, at an
// error (keeping the count so far) and when ctx ends, and uses the default
// batch for a non-positive one.
func TestDrain(t *testing.T) {
	batches := func(ns ...int64) (func(context.Context, int) (int64, error), *[]int) {
		var limits []int
		return func(_ context.Context, limit int) (int64, error) {
			limits = append(limits, limit)
			if len(ns) == 0 {
				return 0, nil
			}
			n := ns[0]
			ns = ns[1:]
			return n, nil
		}, &limits
	}
	ctx := context.Background()

	one, limits := batches(3, 3, 1, 3)
	if n, err := drain(ctx, 3, one); err != nil || n != 7 || len(*limits) != 3 {
		t.Fatalf("drain = %d, %v after %d batches; want 7 after 3 (stop at the short batch)", n, err, len(*limits))
	}

	one, limits = batches(0)
	if _, _ = drain(ctx, 0, one); (*limits)[0] != DefaultCleanupBatch {
		t.Fatalf("batch 0 used limit %d, want DefaultCleanupBatch", (*limits)[0])
	}

	boom := errors.New("boom")
	calls := 0
	n, err := drain(ctx, 2, func(context.Context, int) (int64, error) {
		calls++
		if calls == 2 {
			return 1, boom
		}
		return 2, nil
	})
	if !errors.Is(err, boom) || n != 3 {
		t.Fatalf("drain with an error in batch 2 = %d, %v; want 3, boom", n, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	n, err = drain(cctx, 2, func(context.Context, int) (int64, error) {
		calls++
		cancel()
		return 2, nil
	})
	if !errors.Is(err, context.Canceled) || n != 2 || calls != 1 {
		t.Fatalf("drain after cancel = %d, %v, %d calls; want 2, Canceled, 1", n, err, calls)
	}
}
