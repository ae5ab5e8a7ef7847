package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WakeupChannel is the NOTIFY channel of an outbox table: the producers'
// writer notifies it, the relay's listener listens on it.
func WakeupChannel(outboxTable string) string { return outboxTable + "_wakeup" }

// Listen LISTENs on channel over a connection of its own (taken from the
// pool's config, not from the pool) and returns a channel that receives a
// value when a notification arrived. Notifications coalesce: a burst of
// commits is one wake-up, so the relay claims once per burst.
//
// Wake-ups are an optimisation, never the only path: the relay keeps
// polling. LISTEN does not work through PgBouncer in transaction pooling
// mode, so there the poll is what runs (river#205). The connection is
// re-dialled with backoff until ctx ends.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, log *slog.Logger) <-chan struct{} {
	wake := make(chan struct{}, 1)
	if log == nil {
		log = slog.Default()
	}
	go func() {
		wait := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := listenOnce(ctx, pool, channel, wake)
			if ctx.Err() != nil {
				return
			}
			log.Warn("wake-up listener lost its connection; polling meanwhile", "channel", channel, "err", err, "retry_in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(wait*2, 10*time.Second)
		}
	}()
	return wake
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, wake chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, listenSQL(pgx.Identifier{channel}.Sanitize())); err != nil {
		return err
	}
	// Rows may have been committed while we were not listening.
	signal(wake)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		signal(wake)
	}
}

func signal(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default: // a wake-up is already pending: this one coalesces into it
	}
}

// Notify sends one notification on channel inside tx: one per transaction,
// not one per row. It is delivered at COMMIT and dropped on rollback.
// NOTIFY takes a database-wide lock at commit, so producers that need every
// last insert per second can leave it off and let the relay poll.
func (d Dialect) Notify(ctx context.Context, tx interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}) error {
	t := d.Tables.WithDefaults()
	_, err := tx.Exec(ctx, dialectSQL.notify, WakeupChannel(t.Outbox))
	return err
}
