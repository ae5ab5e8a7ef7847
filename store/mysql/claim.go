package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// runQuery reads the run behind each head: at most run-1 unsent rows of its
// aggregate, in id order, with whether each is deliverable.
func (q queries) runQuery(heads []head, run int) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, len(heads)*4)
	for i, h := range heads {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString(q.run)
		args = append(args, h.aggType, h.aggID, h.id, run-1)
	}
	return b.String(), args
}

// runs returns the heads and, behind each, the next unsent rows of its
// aggregate (at most run-1 of them) with whether each is deliverable.
func (s *Store) runs(ctx context.Context, tx *sql.Tx, heads []head, limit int) ([]head, error) {
	cands := slices.Clone(heads)
	run := min(limit, maxRun)
	if run == 1 {
		return cands, nil
	}
	add := func(rows *sql.Rows, err error, keep func(head) bool) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c head
			if err := rows.Scan(&c.id, &c.aggType, &c.aggID, &c.deliverable); err != nil {
				return err
			}
			if keep(c) {
				cands = append(cands, c)
			}
		}
		return rows.Err()
	}
	if len(heads) == limit {
		// Limit heads fill the claim by themselves, so only rows below the
		// last head can take a place: the unsent rows between the first and
		// the last head, a range the heads scan has just read anyway. Keep
		// those of the heads' aggregates, run-1 per aggregate.
		taken := make(map[aggKey]int, len(heads))
		isHead := make(map[int64]bool, len(heads))
		for _, h := range heads {
			taken[aggKey{h.aggType, h.aggID}] = 1
			isHead[h.id] = true
		}
		rows, err := tx.QueryContext(ctx, s.q.between, heads[0].id, heads[len(heads)-1].id)
		return cands, add(rows, err, func(c head) bool {
			k := aggKey{c.aggType, c.aggID}
			n, ok := taken[k]
			if !ok || n >= run || isHead[c.id] {
				return false
			}
			taken[k] = n + 1
			return true
		})
	}
	// Fewer heads than Limit: the outbox is nearly drained, and a head's run
	// may reach far. Read each run on the aggregate index with its own LIMIT
	// (MariaDB has no LATERAL: one parenthesised SELECT per head, joined with
	// UNION ALL), in chunks of heads.
	for chunk := range slices.Chunk(heads, runChunk) {
		q, args := s.q.runQuery(chunk, run)
		rows, err := tx.QueryContext(ctx, q, args...)
		if err := add(rows, err, func(head) bool { return true }); err != nil {
			return nil, err
		}
	}
	return cands, nil
}

// maxRun caps how many rows of one aggregate one claim takes, so a hot
// aggregate with a deep backlog cannot make a claim read its whole history.
const maxRun = 64

// runChunk heads per runs statement.
const runChunk = 100

// head is a claim candidate: a head or a row of its run.
type head struct {
	id          int64
	aggType     string
	aggID       string
	deliverable bool
}

type aggKey struct{ typ, id string }

// Claim implements store.Outbox; see the package documentation for the
// shape of the transaction.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	if req.Limit <= 0 || req.Lease == "" || req.LeaseFor <= 0 {
		return nil, fmt.Errorf("mysql: claim: need Limit > 0, Lease and LeaseFor > 0")
	}
	var out []store.Record
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.claim(ctx, tx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: claim: %w", err)
	}
	return out, nil
}

func (s *Store) claim(ctx context.Context, tx *sql.Tx, req store.ClaimRequest) ([]store.Record, error) {
	// 1. heads, locked.
	rows, err := tx.QueryContext(ctx, s.q.heads, req.Limit)
	if err != nil {
		return nil, err
	}
	var heads []head
	for rows.Next() {
		h := head{deliverable: true}
		if err := rows.Scan(&h.id, &h.aggType, &h.aggID); err != nil {
			rows.Close()
			return nil, err
		}
		heads = append(heads, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(heads) == 0 {
		return nil, nil
	}

	// 2. runs behind the heads (a plain read; the heads we hold keep every
	// other claimer away from these aggregates).
	cands, err := s.runs(ctx, tx, heads, req.Limit)
	if err != nil {
		return nil, err
	}

	// 3. the deliverable prefix of each run; the Limit lowest ids of all.
	picked := prefix(cands)
	if len(picked) > req.Limit {
		picked = picked[:req.Limit]
	}

	// 4. lock the picked rows and check them again: a row of a run may have
	// been marked by the holder of an expired lease, or be locked for a
	// moment by another claimer's scan (skipped, not waited for). Such a row
	// ends its aggregate's run, so what we return is still a prefix.
	ids := make([]int64, len(picked))
	for i, p := range picked {
		ids[i] = p.id
	}
	in, args := inList(ids, []any{req.LeaseFor.Microseconds()})
	rows, err = tx.QueryContext(ctx, s.q.lock.With(in), args...)
	if err != nil {
		return nil, err
	}
	type locked struct {
		rec   store.Record
		ok    bool
		until utcTime
	}
	byID := map[int64]locked{}
	for rows.Next() {
		var l locked
		l.rec, err = scanRecord(rows, &l.ok, &l.until)
		if err != nil {
			rows.Close()
			return nil, err
		}
		byID[l.rec.ID] = l
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, p := range picked {
		l, found := byID[p.id]
		picked[i].deliverable = found && l.ok
	}
	final := prefix(picked)
	if len(final) == 0 {
		return nil, nil
	}

	// 5. lease them.
	until := byID[final[0].id].until
	ids = ids[:0]
	for _, f := range final {
		ids = append(ids, f.id)
	}
	in, args = inList(ids, []any{req.Lease, sqlTime(until.t)})
	if _, err := tx.ExecContext(ctx, s.q.lease.With(in), args...); err != nil {
		return nil, err
	}
	out := make([]store.Record, len(final))
	for i, f := range final {
		r := byID[f.id].rec
		r.Status = txbox.StatusProcessing
		r.LockedBy = req.Lease
		r.LockedUntil = until.ptr()
		out[i] = r
	}
	return out, nil
}

// prefix returns, sorted by id, the candidates that belong to the
// deliverable prefix of their aggregate: per aggregate in id order, every
// row before the first one that is not deliverable.
func prefix(cands []head) []head {
	sorted := slices.Clone(cands)
	slices.SortFunc(sorted, func(a, b head) int { return cmp.Compare(a.id, b.id) })
	broken := map[aggKey]bool{}
	var out []head
	for _, c := range sorted {
		k := aggKey{c.aggType, c.aggID}
		if broken[k] {
			continue
		}
		if !c.deliverable {
			broken[k] = true
			continue
		}
		out = append(out, c)
	}
	return out
}

func prefixed(alias, list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
