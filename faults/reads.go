package faults

import (
	"context"
	"database/sql"
	"fmt"
)

// checkerReads are what the checker reads of a Database (Ledger, Where,
// Effects, Dead, InboxRows, Progress): the same statements on either
// server, through database/sql. prod is the producers' database, cons the
// consumers'; anyOf is the dialect's condition "column is one of ids",
// with its arguments.
type checkerReads struct {
	prod, cons *sql.DB
	anyOf      func(column string, ids []string) (string, []any)
}

func (r checkerReads) Ledger(ctx context.Context) (map[string]ledgerRow, error) {
	out := map[string]ledgerRow{}
	err := each(ctx, r.prod, `SELECT event_id, aggregate_id, version, committed_at FROM ledger`, func(rows *sql.Rows) error {
		var id string
		var l ledgerRow
		if err := rows.Scan(&id, &l.aggregate, &l.version, &l.committed); err != nil {
			return err
		}
		out[id] = l
		return nil
	})
	return out, err
}

func (r checkerReads) Where(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	err := each(ctx, r.prod, `SELECT event_id, status FROM outbox_event UNION ALL SELECT event_id, 'SENT' FROM outbox_event_sent`, func(rows *sql.Rows) error {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return err
		}
		if out[id] == "" || st != "SENT" {
			out[id] = st
		}
		return nil
	})
	return out, err
}

func (r checkerReads) Effects(ctx context.Context) (map[string]map[string]effectRow, error) {
	out := map[string]map[string]effectRow{}
	err := each(ctx, r.cons, `SELECT consumer, event_id, aggregate_id, version, applied_seq, applied_at, n FROM effects`, func(rows *sql.Rows) error {
		var c, id string
		var e effectRow
		if err := rows.Scan(&c, &id, &e.aggregate, &e.version, &e.seq, &e.applied, &e.n); err != nil {
			return err
		}
		if out[c] == nil {
			out[c] = map[string]effectRow{}
		}
		out[c][id] = e
		return nil
	})
	return out, err
}

func (r checkerReads) InboxRows(ctx context.Context, ids []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(ids) == 0 {
		return out, nil
	}
	cond, args := r.anyOf("event_id", ids)
	err := each(ctx, r.cons, `SELECT event_id, consumer_name, status, retry_count, coalesce(error_message, '')
		FROM inbox_event WHERE `+cond+` ORDER BY consumer_name`,
		func(rows *sql.Rows) error {
			var id, c, st, msg string
			var n int
			if err := rows.Scan(&id, &c, &st, &n, &msg); err != nil {
				return err
			}
			out[id] = append(out[id], fmt.Sprintf("%s %s, %d attempts failed %q", c, st, n, msg))
			return nil
		}, args...)
	return out, err
}

func (r checkerReads) Progress(ctx context.Context) (int, map[string]int, error) {
	var committed int
	if err := r.prod.QueryRowContext(ctx, `SELECT count(*) FROM ledger`).Scan(&committed); err != nil {
		return 0, nil, err
	}
	applied := map[string]int{}
	err := each(ctx, r.cons, `SELECT consumer, count(*) FROM effects GROUP BY consumer`, func(rows *sql.Rows) error {
		var c string
		var n int
		err := rows.Scan(&c, &n)
		applied[c] = n
		return err
	})
	return committed, applied, err
}

func (r checkerReads) Dead(ctx context.Context) (int, int, error) {
	var dead, parked int
	if err := r.prod.QueryRowContext(ctx, `SELECT count(*) FROM outbox_event WHERE status = 'DEAD'`).Scan(&dead); err != nil {
		return 0, 0, err
	}
	err := r.cons.QueryRowContext(ctx, `SELECT count(*) FROM inbox_event WHERE status = 'DEAD'`).Scan(&parked)
	return dead, parked, err
}

// each runs q on db and f on every row.
func each(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, f func(*sql.Rows) error, args ...any) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
