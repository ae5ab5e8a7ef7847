package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/txbox/txbox/store"
)

// maxRun caps how many rows of one aggregate one claim takes, so a hot
// aggregate with a deep backlog cannot make a claim read its whole history.
const maxRun = 64

// Claim implements store.Outbox.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	if req.Limit <= 0 || req.Lease == "" || req.LeaseFor <= 0 {
		return nil, fmt.Errorf("sqlite: claim: need Limit > 0, Lease and LeaseFor > 0")
	}
	var one int
	switch err := s.db.QueryRowContext(ctx, s.q.probe, micros(s.now())).Scan(&one); err {
	case nil:
	case sql.ErrNoRows:
		return nil, nil
	default:
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	run := min(req.Limit, maxRun)
	var recs []store.Record
	err := s.immediate(ctx, func(c *sql.Conn) error {
		// Now is read after the write lock is ours: waiting for it may take
		// a while, and leases must run from the moment of the claim.
		rows, err := c.QueryContext(ctx, s.q.claim, req.Limit, run, req.Lease, micros(s.now()), req.LeaseFor.Microseconds())
		if err != nil {
			return err
		}
		recs, err = collect(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	slices.SortFunc(recs, func(a, b store.Record) int { return cmp.Compare(a.ID, b.ID) })
	return recs, nil
}
