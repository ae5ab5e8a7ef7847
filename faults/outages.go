package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Outages as long as production's: a broker away for longer than the
// relays' whole retry schedule, a stream deleted and made again, a database
// read-only for minutes, a PostgreSQL restart, and the database a handler
// writes to going away. None is the events' failure: each must end with
// nothing lost, nothing DEAD or parked, nothing applied twice and no order
// broken (the checker's Dead and Parked count what an outage wrongly
// spent).
const (
	LongBrokerOutage Kind = "broker down past the retry schedule"
	StreamRecreated  Kind = "stream deleted and made again"
	ReadOnlyLong     Kind = "read-only database for minutes"
	RestartPostgres  Kind = "PostgreSQL restart"
	HandlerDBDown    Kind = "handler's database down"
)

// Long are the outages that last minutes in a long run: each runs alone
// (the schedule's other faults wait for it to end) and is not multiplied
// by the run's scale. For is how long each lasts.
type Long map[Kind]time.Duration

// LongFor is the length of the long outages for a run: the broker down for
// longer than the relays' whole retry schedule (relayRetry), the databases
// read-only and the handler's database away for longer than the
// consumers' (consumerRetry).
func LongFor(defaultRetry bool, brokerDown time.Duration) Long {
	if defaultRetry {
		// The default schedule (10 attempts, 1 s doubling to 300 s) spends
		// its attempts in about 8.5 to 14 minutes.
		return Long{LongBrokerOutage: brokerDown, ReadOnlyLong: 3 * time.Minute, HandlerDBDown: 2 * time.Minute}
	}
	return Long{LongBrokerOutage: brokerDown, ReadOnlyLong: 12 * time.Second, HandlerDBDown: 8 * time.Second}
}

// relayRetry is the relays' retry schedule: the default one (the long run,
// whose broker outage outlasts it), or one that a CI run's outages of
// seconds outlast many times (3 attempts within about half a second).
func relayRetry(defaultRetry bool) []string {
	if defaultRetry {
		return nil
	}
	return []string{"--max-attempts", "3", "--backoff-base", "100ms", "--backoff-max", "1s", "--outage-probe-max", "2s"}
}

// WithLong inserts the long outages into an ordinary schedule made for
// d minus their total: each at a seeded place between two faults, the
// faults after it shifted by its length, so the schedule still ends within
// d and no other fault lands while it lasts.
func WithLong(seed uint64, ordinary []Fault, long Long) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x10a6))
	kinds := make([]Kind, 0, len(long))
	for k := range long {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds) // map order is random; the seed alone must decide
	out := slices.Clone(ordinary)
	for _, k := range kinds {
		i := rng.IntN(len(out) + 1)
		at := time.Duration(0)
		if i > 0 {
			at = out[i-1].At + 5*time.Second
		}
		for j := i; j < len(out); j++ {
			out[j].At += long[k] + 5*time.Second
		}
		out = slices.Insert(out, i, Fault{At: at, Kind: k, For: long[k]})
	}
	return out
}

// Total is the time the long outages take together.
func (l Long) Total() time.Duration {
	var d time.Duration
	for _, v := range l {
		d += v + 5*time.Second
	}
	return d
}

// brokerDown stops the nats-server for d: long past the relays' retry
// schedule, so a relay that spent attempts on the outage would send the
// backlog DEAD.
func brokerDown(w *World, d time.Duration) string {
	w.NATS.Kill()
	time.Sleep(d)
	w.NATS.Start()
	return fmt.Sprintf("down %v", d)
}

// recreateStream deletes the stream under the running relays and makes it
// again, as an operator re-creating it with other settings would. First
// the stream stops capturing the subjects (the relays' publishes then fail
// with no stream for the subject: an outage), the consumers catch up with
// what it holds, and its messages are kept for the checker (they are
// delivered: the deletion, not txbox, takes them out of the stream); then
// it is deleted, the relays find no stream for a few seconds, and it is
// made again with its old settings, empty. The consumers' durable
// consumer went with it and is made again by the subscriber.
func recreateStream(ctx context.Context, w *World) (string, error) {
	nc, err := nats.Connect(w.NATS.URL)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	st, err := js.Stream(ctx, w.Stream)
	if err != nil {
		return "", err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return "", err
	}
	orig := info.Config
	parked := orig
	parked.Subjects = []string{"faults-parked-" + w.Stream}
	if _, err := js.UpdateStream(ctx, parked); err != nil {
		return "", fmt.Errorf("stop the stream capturing its subjects: %w", err)
	}
	restore := func() error {
		_, err := js.CreateOrUpdateStream(ctx, orig)
		return err
	}
	caught, err := w.caughtUp(ctx, js, 5*time.Minute)
	if err != nil {
		_ = restore()
		return "", err
	}
	kept, err := readLiveStream(ctx, w)
	if err != nil {
		_ = restore()
		return "", fmt.Errorf("keep the stream's messages: %w", err)
	}
	w.keepDeleted(kept)
	if err := js.DeleteStream(ctx, w.Stream); err != nil {
		_ = restore()
		return "", fmt.Errorf("delete the stream: %w", err)
	}
	time.Sleep(3 * time.Second)
	if err := restore(); err != nil {
		return "", fmt.Errorf("make the stream again: %w", err)
	}
	return fmt.Sprintf("%d messages deleted with it (consumers caught up in %v)", len(kept), caught.Round(10*time.Millisecond)), nil
}

// caughtUp waits until the consumers' durable consumer has nothing pending
// or unacknowledged, and returns how long that took.
func (w *World) caughtUp(ctx context.Context, js jetstream.JetStream, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		c, err := js.Consumer(ctx, w.Stream, consumerDurable)
		if err == nil {
			info, err := c.Info(ctx)
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return time.Since(start), nil
			}
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("the consumers did not catch up with the stream within %v", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restartPostgres restarts the world's PostgreSQL server as a crash would
// end it (immediate shutdown, crash recovery at start): every session of
// the relays, the consumers and the producers is cut, CDC's slot goes back
// to what it confirmed.
func restartPostgres(w *World) string {
	start := time.Now()
	w.PG.Crash()
	time.Sleep(time.Second)
	w.PG.Start()
	return fmt.Sprintf("down %v", time.Since(start).Round(10*time.Millisecond))
}

// handlerDBDown cuts the consumers' handlers off from the database they
// write to beside the inbox's (the audit database) for d: their handlers
// fail with a lost or refused connection, an outage, which must park
// nothing however long it lasts.
func handlerDBDown(w *World, d time.Duration) string {
	w.AuditProxy.Cut()
	time.Sleep(d)
	w.AuditProxy.Restore()
	return fmt.Sprintf("down %v", d)
}
