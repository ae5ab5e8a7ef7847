package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
)

// The faults that are not kind to the data, on PostgreSQL: operators
// working on the outbox under the running relays, clock trouble and a
// read-only database (the MariaDB ones are in mariadb.go, the full stream
// in nats.go). Each is expected to pause the flow at most: the checker must
// still find nothing lost, doubled or reordered.

// truncateKeeping is the clean-up operators do: the undelivered rows are
// kept, the table is emptied and its identity restarted, and the kept rows
// go back in their order with new ids from 1. Rows a lease relay holds go
// back as PENDING (their lease is void: the ids changed), so a relay still
// publishing them only makes duplicates, and its marks, fenced on the old
// lease, change nothing. The delivered history stays in the archive, whose
// ids are not unique for this reason (migration 004).
func (d *Postgres) truncateKeeping(ctx context.Context) (string, error) {
	var kept int64
	err := pgx.BeginFunc(ctx, d.Prod, func(tx pgx.Tx) error {
		for _, q := range []string{
			`SET LOCAL lock_timeout = '10s'`,
			`LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE`,
			`CREATE TEMP TABLE faults_keep ON COMMIT DROP AS SELECT * FROM outbox_event WHERE status <> 'SENT'`,
			`TRUNCATE outbox_event RESTART IDENTITY`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		tag, err := tx.Exec(ctx, `INSERT INTO outbox_event (id, event_id, aggregate_type, aggregate_id, aggregate_version,
				event_type, payload, headers, status, retry_count, next_retry_at, occurred_at, created_at, last_error)
			SELECT row_number() OVER (ORDER BY id), event_id, aggregate_type, aggregate_id, aggregate_version,
				event_type, payload, headers, CASE WHEN status = 'PROCESSING' THEN 'PENDING' ELSE status END,
				retry_count, next_retry_at, occurred_at, created_at, last_error
			FROM faults_keep ORDER BY id`)
		if err != nil {
			return err
		}
		kept = tag.RowsAffected()
		// The identity goes on after the kept rows, as if they had been
		// inserted with it.
		_, err = tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('outbox_event', 'id'), greatest($1::bigint, 1), $1::bigint > 0)`, kept)
		return err
	})
	return fmt.Sprintf("kept %d undelivered rows", kept), err
}

// explicitIDs is a producer writing its own outbox ids: two events of a new
// aggregate, in one transaction, with ids it took from the sequence by hand,
// or (World.GapIDs) ids the sequence handed out earlier to transactions that
// rolled back, below where claims read from (the claim floor), falling back
// to the sequence when there are no such gaps.
func (d *Postgres) explicitIDs(ctx context.Context, n int) (string, error) {
	agg := fmt.Sprintf("explicit-%d", n)
	var ids []int64
	err := pgx.BeginFunc(ctx, d.Prod, func(tx pgx.Tx) error {
		ids = ids[:0]
		rows, err := tx.Query(ctx, `WITH hi AS (SELECT last_value - 200 AS v FROM outbox_event_id_seq)
			SELECT g FROM hi, generate_series(greatest((SELECT v FROM hi) - 2000, 1), (SELECT v FROM hi)) g
			WHERE NOT EXISTS (SELECT 1 FROM outbox_event o WHERE o.id = g)
			  AND NOT EXISTS (SELECT 1 FROM outbox_event_sent s WHERE s.id = g)
			ORDER BY g LIMIT 2`)
		if err != nil {
			return err
		}
		gaps, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if d.GapIDs {
			ids = gaps
		}
		for len(ids) < 2 {
			var id int64
			if err := tx.QueryRow(ctx, `SELECT nextval('outbox_event_id_seq')`).Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, version) VALUES ($1, 2)`, agg); err != nil {
			return err
		}
		for i, id := range ids {
			ev := txbox.MustEvent("Order", agg, "OrderChanged", map[string]any{"order": agg, "version": i + 1})
			ev.AggregateVersion = int64(i + 1)
			if _, err := tx.Exec(ctx, `INSERT INTO outbox_event (id, event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, ev.ID, ev.AggregateType, ev.AggregateID, ev.AggregateVersion, ev.Type, string(ev.Payload)); err != nil {
				return err
			}
			if err := d.recordLedger(ctx, tx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	return fmt.Sprintf("%s at ids %v", agg, ids), err
}

// manualRetry is an operator setting unsent rows to RETRY by hand, as for a
// redrive, under the running relays. Rows a claim holds are left alone
// (SKIP LOCKED); a row a lease relay is publishing loses its lease, so that
// relay's mark is fenced off and the row goes again (a duplicate).
func (d *Postgres) manualRetry(ctx context.Context) (string, error) {
	tag, err := d.Prod.Exec(ctx, `UPDATE outbox_event SET status = 'RETRY', next_retry_at = now() + interval '500 milliseconds',
			retry_count = retry_count + 1, locked_by = NULL, locked_until = NULL, last_error = 'set to RETRY by hand (faults)'
		WHERE id IN (SELECT id FROM outbox_event WHERE status IN ('PENDING', 'PROCESSING') ORDER BY id LIMIT 20 FOR UPDATE SKIP LOCKED)`)
	return fmt.Sprintf("%d rows", tag.RowsAffected()), err
}

// vacuumFull rewrites the outbox and its archive under the running relays
// (an ACCESS EXCLUSIVE lock while it runs).
func (d *Postgres) vacuumFull(ctx context.Context) error {
	_, err := d.Prod.Exec(ctx, `VACUUM FULL outbox_event, outbox_event_sent`)
	return err
}

// readOnly makes both databases read-only for dur, as a failover to a
// replica or a full disk does. default_transaction_read_only is read when a
// session starts: the relays' and consumers' sessions are ended so that
// they reconnect into it, and every session begun during the window is
// ended after the reset so that nothing stays read-only. It is set on the
// harness's own databases only (not the audit database).
func (d *Postgres) readOnly(ctx context.Context, dur time.Duration) (string, error) {
	var since time.Time
	if err := d.Admin.QueryRow(ctx, `SELECT now()`).Scan(&since); err != nil {
		return "", err
	}
	set := func(v string) error {
		for _, db := range []string{d.ProdDB, d.ConsDB} {
			if _, err := d.Admin.Exec(ctx, "ALTER DATABASE "+db+" "+v); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set("SET default_transaction_read_only = on"); err != nil {
		return "", err
	}
	var n1, n2 int
	err := d.Admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name IN ('txbox-relay', 'txbox-consumer')`).Scan(&n1)
	time.Sleep(dur)
	if rerr := set("RESET default_transaction_read_only"); rerr != nil {
		return "", rerr
	}
	if err2 := d.Admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname IN ($1, $2) AND pid <> pg_backend_pid() AND backend_start >= $3`, d.ProdDB, d.ConsDB, since).Scan(&n2); err == nil {
		err = err2
	}
	return fmt.Sprintf("ended %d sessions, then %d begun read-only", n1, n2), err
}

// leaseClockJump is the lease relays' clock jumping forward by jump while they
// hold leases, again and again for three seconds (a lease is held only
// while its batch is published, a few milliseconds at a time).
// PostgreSQL's lease claims run on the server's clock (now()), so each jump
// is simulated by moving the held leases and the retry times back by jump:
// held leases run out at once, and another relay may take their rows while
// the holder still publishes them (duplicates; the holder's marks are
// fenced on its lease token).
func (d *Postgres) leaseClockJump(ctx context.Context, jump time.Duration) (string, error) {
	var leases, retries int64
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		var l, r int64
		// SKIP LOCKED: rows a claim or a mark is changing right now are
		// left for the next jump; waiting for them deadlocked with the
		// relays' marks.
		err := d.Prod.QueryRow(ctx, `WITH m AS (UPDATE outbox_event SET
				locked_until = locked_until - $1 * interval '1 millisecond',
				next_retry_at = next_retry_at - $1 * interval '1 millisecond'
			WHERE id IN (SELECT id FROM outbox_event WHERE status IN ('PROCESSING', 'RETRY') ORDER BY id FOR UPDATE SKIP LOCKED)
			RETURNING status)
			SELECT count(*) FILTER (WHERE status = 'PROCESSING'), count(*) FILTER (WHERE status = 'RETRY') FROM m`, jump.Milliseconds()).Scan(&l, &r)
		if err != nil {
			return "", err
		}
		leases, retries = leases+l, retries+r
	}
	return fmt.Sprintf("jumped %v every 10ms for 3s: %d held leases and %d retry times moved", jump, leases, retries), nil
}

// holdTransaction holds a REPEATABLE READ transaction open on the
// producers' database for dur, reading the outbox as a report does: its
// snapshot holds back VACUUM while the relays claim, archive and delete.
func (d *Postgres) holdTransaction(ctx context.Context, dur time.Duration) (string, error) {
	tx, err := d.Prod.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var rows int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM outbox_event`).Scan(&rows); err != nil {
		return "", err
	}
	time.Sleep(dur)
	var dead int64
	_ = d.Prod.QueryRow(ctx, `SELECT coalesce(sum(n_dead_tup), 0)::int8 FROM pg_stat_user_tables
		WHERE relname IN ('outbox_event', 'outbox_event_sent')`).Scan(&dead)
	return fmt.Sprintf("a snapshot over %d outbox rows held %v; %d dead tuples at its end", rows, dur, dead), nil
}
