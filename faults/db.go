package faults

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/txbox/txbox/internal/testenv"
)

// Database is the world's database server: the producers' database (the
// business table, the outbox, the ledger) and the consumers' (the inbox and
// the effects table), created for the run, and a fault proxy in front of
// the server for the relays and the consumers. The producers, the faults
// and the checker reach the server directly.
type Database interface {
	// Kind is the store's URL scheme: postgres or mysql.
	Kind() string
	// RelayURL and ConsumerURL are what the relays and the consumers
	// connect with, through the proxy.
	RelayURL() string
	ConsumerURL() string
	Proxy() *testenv.Proxy
	// AuditURL is the database the consumers' handlers write to beside the
	// inbox's (an audit trail), reached through AuditProxy, which the
	// handler's-database-down fault cuts.
	AuditURL() string
	AuditProxy() *testenv.Proxy
	// RelayArgs are relay i's flags of this database (its kind of claims).
	RelayArgs(i int) []string

	// Write is one producer transaction: the order's version bumped under
	// its row lock, its event written to the outbox and to the ledger.
	// rollback rolls it back on purpose (errRollback). It returns the
	// event's id.
	Write(ctx context.Context, agg string, rollback bool) (string, error)

	// What the checker reads, straight from the server.
	Ledger(ctx context.Context) (map[string]ledgerRow, error)
	// Where maps an event id to its status in the outbox table, or SENT
	// for one in the archive.
	Where(ctx context.Context) (map[string]string, error)
	// Effects maps an inbox consumer name to its applied events.
	Effects(ctx context.Context) (map[string]map[string]effectRow, error)
	// Dead counts the DEAD outbox rows and the parked (DEAD) inbox rows.
	// The harness writes no poison event, so any is an outage that spent
	// attempts.
	Dead(ctx context.Context) (dead, parked int, err error)
	// InboxRows describes the inbox rows of the events (one line per
	// consumer name: status, attempts, error), for the report of an event
	// not applied.
	InboxRows(ctx context.Context, ids []string) (map[string][]string, error)
	// Progress counts the ledger and each consumer's effects, cheaply
	// enough to poll.
	Progress(ctx context.Context) (committed int, applied map[string]int, err error)

	// Minimums are this database's fault kinds and how many a short run
	// injects at least; Fault injects one of them, or ReadOnlyLong (n: how
	// many of its kind came before), and returns errNotHere for a kind of
	// the broker's.
	Minimums() Minimums
	Fault(ctx context.Context, f Fault, n int) (note string, err error)
}

// dataFaults are the faults both databases inject, each its own way
// (harder.go, mariadb.go).
type dataFaults interface {
	truncateKeeping(ctx context.Context) (string, error)
	explicitIDs(ctx context.Context, n int) (string, error)
	manualRetry(ctx context.Context) (string, error)
	readOnly(ctx context.Context, d time.Duration) (string, error)
	holdTransaction(ctx context.Context, d time.Duration) (string, error)
	leaseClockJump(ctx context.Context, jump time.Duration) (string, error)
}

// dataFault is the part of Fault both databases share: it injects f when
// it is one of dataFaults, else it returns errNotHere.
func dataFault(ctx context.Context, d dataFaults, f Fault, n int) (string, error) {
	switch f.Kind {
	case TruncateOutbox:
		return d.truncateKeeping(ctx)
	case ExplicitIDs:
		return d.explicitIDs(ctx, n)
	case ManualRetry:
		return d.manualRetry(ctx)
	case ReadOnly:
		return d.readOnly(ctx, 3*time.Second)
	case ReadOnlyLong:
		return d.readOnly(ctx, f.For)
	case HeldTransaction:
		return d.holdTransaction(ctx, f.For)
	case LeaseClockJump:
		return d.leaseClockJump(ctx, 5*time.Second)
	}
	return "", errNotHere
}

// serverAddr is the host:port the world's proxies forward to, from the
// server's URL and its dialect's default port.
func serverAddr(u *url.URL, defaultPort string) string {
	if u.Port() == "" {
		return u.Host + ":" + defaultPort
	}
	return u.Host
}

// errNotHere is a database's or a broker's answer to a fault kind it does
// not inject.
var errNotHere = errors.New("not a fault of this part of the world")

type ledgerRow struct {
	aggregate string
	version   int64
	committed time.Time
}

type effectRow struct {
	aggregate string
	version   int64
	seq       int64
	applied   time.Time
	n         int
}
