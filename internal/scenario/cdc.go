package scenario

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// CDC runs the scenarios of a PostgreSQL Store with relays in change data
// capture mode (`txbox relay --mode cdc`, package store/postgres/cdc): the
// publication and one replication slot per test are made at migration, and
// the slot is dropped when the test ends. Store must reach a database with
// logical decoding (wal_level = logical), such as storeenv.Postgres{Logical:
// true}, which falls back to a private server when the shared one lacks it.
type CDC struct{ Store }

func isCDC(st Store) bool { _, ok := st.(CDC); return ok }

// slotName is the replication slot of a test's tables: unique as they are.
func slotName(s store.Store) string { return "txbox_" + s.Tables().Outbox }

// migrateCDC prepares s for CDC relays and drops the slot when t ends
// (after the test's relay processes are stopped: cleanups run last first).
func migrateCDC(t *testing.T, s store.Store) {
	t.Helper()
	ps, ok := s.(*postgres.Store)
	if !ok {
		t.Fatalf("CDC scenarios need a PostgreSQL store, got %T", s)
	}
	ctx := context.Background()
	if err := cdc.Migrate(ctx, ps); err != nil {
		t.Fatalf("migrate --cdc: %v", err)
	}
	slot := slotName(s)
	if _, err := cdc.CreateSlot(ctx, ps, slot, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			err := cdc.DropSlot(ctx, ps, slot)
			if err == nil {
				break
			}
			if !errors.Is(err, cdc.ErrSlotActive) || ctx.Err() != nil {
				t.Errorf("replication slot %s left behind: %v", slot, err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = ps.Pool().Exec(ctx, "DROP PUBLICATION IF EXISTS "+cdc.Publication(ps))
		_, _ = ps.Pool().Exec(ctx, "DROP TABLE IF EXISTS "+ps.Tables().Qualified(ps.Tables().Outbox+"_cdc_slots"))
	})
}

// inProcessCDC starts a CDC relay in this process; it stops when the test
// ends. It returns the relay that publishes, for its counters.
func inProcessCDC(t *testing.T, s store.Store, url string, d *Destination, cfg relay.Config) *relay.Relay {
	t.Helper()
	cfg.Publisher, cfg.Topic = d.Publisher(t), broker.Topic(d.Topic)
	r, err := cdc.New(cdc.Config{Store: s.(*postgres.Store), ConnString: url, Slot: slotName(s), Relay: cfg,
		BatchSize: cfg.BatchSize, StandbyRetry: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, r.Run)
	return r.Relay()
}

// CDCStandbyTakeover: two relay processes on one slot while a backlog
// flows; PostgreSQL lets one read it and the other waits as standby. The
// reader is SIGKILLed, the standby takes over, and nothing is lost.
func CDCStandbyTakeover(t *testing.T, st Store, br Broker) {
	s := migrated(t, st)
	d := br.Setup(t)
	bin := testenv.Binary(t)
	// Info logs say which relay reads the slot.
	args := relayArgs(t, st, s, d, "--batch-size", "100", "--log-level", "info")
	a := Start(t, bin, append(args, "--relay-id", "relay-a")...)
	b := Start(t, bin, append(args, "--relay-id", "relay-b")...)
	first := backlog(2000, 40)
	write(t, st, s, 100, first)
	waitStored(t, d, first[:1], 30*time.Second)
	// Kill the one that reads the slot, as its log says.
	reader, standby := a, b
	for deadline := time.Now().Add(10 * time.Second); ; {
		if strings.Contains(b.Output(), "reading the slot") && !strings.Contains(a.Output(), "reading the slot") {
			reader, standby = b, a
			break
		}
		if strings.Contains(a.Output(), "reading the slot") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	reader.Kill()
	rest := backlog(2000, 40)
	write(t, st, s, 100, rest)
	all := append(append([]txbox.Event{}, first...), rest...)
	stored := waitStored(t, d, all, 60*time.Second)
	checkOrder(t, "stored", stored, all)
	if !strings.Contains(standby.Output(), "reading the slot") {
		t.Fatalf("the standby never read the slot:\n%s", tail(standby.Output(), 20))
	}
	standby.Term(10 * time.Second)
}
