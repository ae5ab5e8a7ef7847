package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/store"
)

// FinishIsolating implements claimapi.IsolatingClaim. The normal path is
// Finish: marks and COMMIT in one round trip, no savepoint. When a mark is
// refused for a row's own reason (a reused id in an archive keyed on it, a
// constraint or trigger an operator added), that transaction is rolled
// back, the claim's rows are locked again in a new one, and the sent rows
// are marked in halves under savepoints down to the single refused row; the
// refused rows are recorded with the failure refused gives them. Without
// this, the whole batch would roll back, be published again and be refused
// again, with nothing ever reaching RETRY or DEAD.
func (c *txClaim) FinishIsolating(ctx context.Context, sent []int64, failures []store.Failure, refusedAs func(id int64, err error) store.Failure) error {
	c.keepOnRefusal = true
	err := c.Finish(ctx, sent, failures)
	c.keepOnRefusal = false
	if err == nil || !errors.Is(err, store.ErrRefused) || c.conn == nil {
		return err
	}
	if err := c.isolate(ctx, sent, failures, refusedAs); err != nil {
		c.drop()
		return fmt.Errorf("postgres: finish claim, isolating a refused mark: %w", err)
	}
	c.end(false)
	return nil
}

func (c *txClaim) isolate(ctx context.Context, sent []int64, failures []store.Failure, refusedAs func(int64, error) store.Failure) error {
	conn := c.conn.Conn()
	// The failed batch left its transaction aborted (or, past its COMMIT,
	// rolled back); a ROLLBACK ends it either way.
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	// The rows were free for a moment: take back those no one else took.
	// This store's other claims leave them alone (they are still in held).
	ids := append(make([]int64, 0, len(sent)+len(failures)), sent...)
	for _, f := range failures {
		ids = append(ids, f.ID)
	}
	rows, err := conn.Query(ctx, c.s.q.relock, ids)
	if err != nil {
		return err
	}
	ours, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	mine := make(map[int64]bool, len(ours))
	for _, id := range ours {
		mine[id] = true
	}
	var toMark []int64
	for _, id := range sent {
		if mine[id] {
			toMark = append(toMark, id)
		}
	}
	var fs []store.Failure
	for _, f := range failures {
		if mine[f.ID] {
			fs = append(fs, f)
		}
	}
	if len(toMark) > 0 {
		mark := func(ids []int64) error { return c.underSavepoint(ctx, c.s.q.txSent, ids) }
		if err := claimapi.Isolate(toMark, mark, func(id int64, err error) { fs = append(fs, refusedAs(id, err)) }); err != nil {
			return err
		}
	}
	if len(fs) > 0 {
		if err := c.underSavepoint(ctx, c.s.q.txFailed, failureArgs(fs)...); err != nil && !errors.Is(err, store.ErrRefused) {
			return err
		} // refused too: those rows are released unchanged
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}

// underSavepoint runs one statement so that its refusal undoes only itself.
func (c *txClaim) underSavepoint(ctx context.Context, q string, args ...any) error {
	conn := c.conn.Conn()
	if _, err := conn.Exec(ctx, "SAVEPOINT txbox_mark"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, q, args...); err != nil {
		if _, rerr := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT txbox_mark"); rerr != nil {
			return rerr
		}
		return refused(err)
	}
	_, err := conn.Exec(ctx, "RELEASE SAVEPOINT txbox_mark")
	return err
}
