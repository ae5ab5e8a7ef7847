package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/txbox/txbox/store"
)

// Backlog implements store.BacklogSampler with one statement
// (queries/backlog.sql) that reads only the partial indexes.
func (s *Store) Backlog(ctx context.Context) (store.Backlog, error) {
	var b store.Backlog
	var ageMs float64
	err := s.pool.QueryRow(ctx, s.st.backlog).Scan(&b.Pending, &b.Retry, &b.Processing, &ageMs, &b.Dead)
	if err != nil {
		return b, fmt.Errorf("postgres: backlog: %w", err)
	}
	b.OldestAge = max(0, time.Duration(ageMs*float64(time.Millisecond)))
	return b, nil
}

// Horizon implements store.HorizonSampler.
func (s *Store) Horizon(ctx context.Context) (store.Horizon, error) {
	var h store.Horizon
	var ms float64
	if err := s.pool.QueryRow(ctx, s.st.horizon).Scan(&ms, &h.Holder, &h.DeadRows); err != nil {
		return h, fmt.Errorf("postgres: horizon: %w", err)
	}
	h.OldestTransaction = time.Duration(ms * float64(time.Millisecond))
	return h, nil
}
