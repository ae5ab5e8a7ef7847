package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/store"
)

// maxRun caps how many rows of one aggregate one claim takes, so a hot
// aggregate with a deep backlog cannot make a claim read its whole history.
const maxRun = 64

// headBound is how many aggregates the fallback's loose index scan visits
// before it looks at rows instead (queries/heads.sql).
const headBound = 4096

// Claim implements store.Outbox.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	if req.Limit <= 0 || req.Lease == "" || req.LeaseFor <= 0 {
		return nil, fmt.Errorf("postgres: claim: need Limit > 0, Lease and LeaseFor > 0")
	}
	run := min(req.Limit, maxRun)
	window := min(req.Limit*scanFactor, maxWindow)
	split := s.splitArg()
	recs, err := s.claimWith(ctx, s.q.claimScan, req.Limit, window, req.Lease, req.LeaseFor.Milliseconds(), split)
	if err != nil || len(recs) == req.Limit {
		return recs, err
	}
	// The window was full of rows that could not be taken (a deep blocked
	// or leased aggregate at the front): deliverable rows may lie beyond
	// it. The head-based claim finds them wherever they are.
	var full bool
	if err := s.pool.QueryRow(ctx, s.q.windowFull, window, noFloor).Scan(&full); err != nil {
		return recs, fmt.Errorf("postgres: claim: %w", err)
	}
	if !full {
		return recs, nil
	}
	more, err := s.claimWith(ctx, s.q.claim, req.Limit-len(recs), run, req.Lease, req.LeaseFor.Milliseconds(), split)
	recs = append(recs, more...)
	sortByID(recs)
	return recs, err
}

func sortByID(recs []store.Record) {
	slices.SortFunc(recs, func(a, b store.Record) int { return cmp.Compare(a.ID, b.ID) })
}

// rollbackTimeout bounds ending a claim that is being given up.
const rollbackTimeout = 5 * time.Second

// scanFactor and maxWindow size the fast path's window: Limit*scanFactor
// rows, at most maxWindow, so rows in flight at the front do not hide the
// deliverable ones behind them.
const (
	scanFactor = 4
	maxWindow  = 20000
)

// claimWith runs a lease claim as an unnamed statement, planned for its
// arguments every time: the lease claim is the fallback path, and a plan
// fitted to the arguments is the safe choice there.
func (s *Store) claimWith(ctx context.Context, query string, args ...any) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	recs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim: %w", err)
	}
	sortByID(recs)
	return recs, nil
}

func prefixed(alias, list string) string {
	out := make([]byte, 0, len(list)*2)
	start := true
	for i := 0; i < len(list); i++ {
		c := list[i]
		if start && c != ' ' && c != '\n' && c != '\t' {
			out = append(out, alias...)
			out = append(out, '.')
			start = false
		}
		if c == ',' {
			start = true
		}
		out = append(out, c)
	}
	return string(out)
}
