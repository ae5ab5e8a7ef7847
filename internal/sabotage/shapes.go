package sabotage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/claimapi"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
)

// A Go type has the methods it declares, so a wrapper keeps an optional
// interface only if its type declares it. The wrappers here therefore come
// in shapes, one per set of optional interfaces a store, a claim or a
// dialect of this module has, and each wrapper takes the shape of what it
// wraps. A store of another shape makes the sabotaged build stop with a
// panic rather than run a relay that differs from the shipped one in more
// than its sabotage; TestWrappersKeepOptionalInterfaces checks every store
// of the module against every interface package store declares.

// hooks are what a sabotage changes in a store; nil hooks delegate.
type hooks struct {
	// claim replaces Claim (lease claims).
	claim func(ctx context.Context, s store.Store, req store.ClaimRequest) ([]store.Record, error)
	// claimTx changes a transaction claim just taken (ClaimTx and
	// ClaimTxChained), records or not.
	claimTx func(ctx context.Context, c claimapi.Claim) (claimapi.Claim, error)
	// inbox changes the store's inbox SQL (InboxDialect).
	inbox func(store.InboxDialect) store.InboxDialect
}

// base is the part every store shape shares: the store and the lease claim.
type base struct {
	store.Store
	h hooks
}

func (b base) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Record, error) {
	if b.h.claim == nil {
		return b.Store.Claim(ctx, req)
	}
	return b.h.claim(ctx, b.Store, req)
}

func (b base) claimTx(ctx context.Context, c claimapi.Claim, err error) (claimapi.Claim, error) {
	if err != nil {
		return nil, err
	}
	if b.h.claimTx == nil {
		return c, nil
	}
	return b.h.claimTx(ctx, c)
}

func (b base) inboxDialect(d store.InboxDialect) store.InboxDialect {
	if b.h.inbox == nil {
		return d
	}
	return b.h.inbox(d)
}

// optional is an interface a shape is chosen by: its name in a signature,
// and whether a value has it.
type optional struct {
	name string
	has  func(any) bool
}

// The interfaces a shape is chosen by: every optional interface of package
// store that a Store may have.
var storeInterfaces = []optional{
	{"claimapi.TxClaimer", is[claimapi.TxClaimer]},
	{"claimapi.ChainClaimer", is[claimapi.ChainClaimer]},
	{"claimapi.Splitter", is[claimapi.Splitter]},
	{"store.BacklogSampler", is[store.BacklogSampler]},
	{"store.CleanupLocker", is[store.CleanupLocker]},
	{"store.Counter", is[store.Counter]},
	{"store.DeadBlocker", is[store.DeadBlocker]},
	{"store.HorizonSampler", is[store.HorizonSampler]},
	{"store.InboxAdmin", is[store.InboxAdmin]},
	{"store.InboxStore[pgx.Tx]", is[store.InboxStore[pgx.Tx]]},
	{"store.InboxStore[*sql.Tx]", is[store.InboxStore[*sql.Tx]]},
}

func is[I any](v any) bool { _, ok := v.(I); return ok }

func signature(v any, of []optional) string {
	var names []string
	for _, i := range of {
		if i.has(v) {
			names = append(names, i.name)
		}
	}
	return strings.Join(names, ", ")
}

// The store shapes: the PostgreSQL store, the MySQL store, the SQLite
// store, and a store with no optional interface (a test's).
var storeShapes = map[string]func(base) store.Store{
	"": func(b base) store.Store { return plainStore{b} },
	"store.BacklogSampler, store.CleanupLocker, store.Counter, store.DeadBlocker, store.InboxAdmin, store.InboxStore[*sql.Tx]": func(b base) store.Store {
		return newSQLStore(b)
	},
	"store.BacklogSampler, store.CleanupLocker, store.Counter, store.DeadBlocker, store.HorizonSampler, store.InboxAdmin, store.InboxStore[*sql.Tx]": func(b base) store.Store {
		return mysqlStore{newSQLStore(b), b.Store.(store.HorizonSampler)}
	},
	"claimapi.TxClaimer, claimapi.ChainClaimer, claimapi.Splitter, store.BacklogSampler, store.CleanupLocker, store.Counter, store.DeadBlocker, store.HorizonSampler, store.InboxAdmin, store.InboxStore[pgx.Tx]": func(b base) store.Store {
		return pgStore{b, b.Store.(claimapi.ChainClaimer), b.Store.(claimapi.Splitter), b.Store.(store.BacklogSampler), b.Store.(store.CleanupLocker),
			b.Store.(store.Counter), b.Store.(store.DeadBlocker), b.Store.(store.HorizonSampler), b.Store.(store.InboxStore[pgx.Tx])}
	},
}

func newSQLStore(b base) sqlStore {
	return sqlStore{b, b.Store.(store.BacklogSampler), b.Store.(store.CleanupLocker), b.Store.(store.Counter), b.Store.(store.DeadBlocker), b.Store.(store.InboxStore[*sql.Tx])}
}

func wrapStore(s store.Store, h hooks) store.Store {
	sig := signature(s, storeInterfaces)
	mk, ok := storeShapes[sig]
	if !ok {
		panic(fmt.Sprintf("sabotage: no wrapper keeps the optional interfaces of %T (%s)", s, sig))
	}
	return mk(base{s, h})
}

type plainStore struct{ base }

type sqlStore struct {
	base
	store.BacklogSampler
	store.CleanupLocker
	store.Counter
	store.DeadBlocker
	store.InboxStore[*sql.Tx]
}

type mysqlStore struct {
	sqlStore
	store.HorizonSampler
}

func (s sqlStore) InboxDialect() store.InboxDialect {
	return s.inboxDialect(s.InboxStore.InboxDialect())
}

type pgStore struct {
	base
	chain claimapi.ChainClaimer
	claimapi.Splitter
	store.BacklogSampler
	store.CleanupLocker
	store.Counter
	store.DeadBlocker
	store.HorizonSampler
	store.InboxStore[pgx.Tx]
}

func (s pgStore) ClaimTx(ctx context.Context, limit int) (claimapi.Claim, error) {
	c, err := s.chain.ClaimTx(ctx, limit)
	return s.claimTx(ctx, c, err)
}

func (s pgStore) ClaimTxChained(ctx context.Context, limit int) (claimapi.ChainedClaim, error) {
	c, err := s.chain.ClaimTxChained(ctx, limit)
	if err != nil {
		return nil, err
	}
	w, err := s.claimTx(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	return w.(claimapi.ChainedClaim), nil // wrapClaim keeps the shape of c
}

func (s pgStore) InboxDialect() store.InboxDialect {
	return s.inboxDialect(s.InboxStore.InboxDialect())
}

// claim is a transaction claim whose records are recs; once ended (its
// outcome already committed by the sabotage), what the relay then does with
// it changes nothing.
type claim struct {
	inner claimapi.Claim
	recs  []store.Record
	ended bool
}

func (c *claim) Records() []store.Record { return c.recs }

func (c *claim) Finish(ctx context.Context, sent []int64, failures []store.Failure) error {
	if c.ended {
		return nil
	}
	return c.inner.Finish(ctx, sent, failures)
}

func (c *claim) Abort() {
	if !c.ended {
		c.inner.Abort()
	}
}

func (c *claim) release(ids []int64) {
	if !c.ended {
		c.inner.(claimapi.ChainedClaim).Release(ids)
	}
}

func (c *claim) finishIsolating(ctx context.Context, sent []int64, failures []store.Failure, refused func(int64, error) store.Failure) error {
	if c.ended {
		return nil
	}
	return c.inner.(claimapi.IsolatingClaim).FinishIsolating(ctx, sent, failures, refused)
}

// The claim shapes: all four sets of the two optional claim interfaces.
type (
	chainedClaim          struct{ *claim }
	isolatingClaim        struct{ *claim }
	chainedIsolatingClaim struct{ *claim }
)

func (c chainedClaim) Release(ids []int64)          { c.release(ids) }
func (c chainedIsolatingClaim) Release(ids []int64) { c.release(ids) }

func (c isolatingClaim) FinishIsolating(ctx context.Context, sent []int64, failures []store.Failure, refused func(int64, error) store.Failure) error {
	return c.finishIsolating(ctx, sent, failures, refused)
}

func (c chainedIsolatingClaim) FinishIsolating(ctx context.Context, sent []int64, failures []store.Failure, refused func(int64, error) store.Failure) error {
	return c.finishIsolating(ctx, sent, failures, refused)
}

func wrapClaim(inner claimapi.Claim, recs []store.Record, ended bool) claimapi.Claim {
	c := &claim{inner: inner, recs: recs, ended: ended}
	_, chained := inner.(claimapi.ChainedClaim)
	_, isolating := inner.(claimapi.IsolatingClaim)
	switch {
	case chained && isolating:
		return chainedIsolatingClaim{c}
	case chained:
		return chainedClaim{c}
	case isolating:
		return isolatingClaim{c}
	}
	return c
}

// outageClassifier is a dialect that tells an unavailable database from a
// failing statement (the inbox asks its dialect).
type outageClassifier interface{ IsUnavailable(err error) bool }

// The interfaces an inbox dialect's shape is chosen by: the optional
// interfaces of package store that a dialect may have, and those other
// packages of the module look for in one (outbox.Notifier).
var dialectInterfaces = []optional{
	{"store.Preparer", is[store.Preparer]},
	{"store.MessageEmitter", is[store.MessageEmitter]},
	{"outbox.Notifier", is[outbox.Notifier]},
	{"store.InboxProcessedAcquirer", is[store.InboxProcessedAcquirer]},
	{"store.InboxBatchInserter", is[store.InboxBatchInserter]},
	{"IsUnavailable", is[outageClassifier]},
}

// The dialect shapes: PostgreSQL's, MySQL's and SQLite's, each with and
// without an outage classifier.
var dialectShapes = map[string]func(noInbox) store.InboxDialect{
	"store.Preparer": func(n noInbox) store.InboxDialect {
		return sqlNoInbox{n, n.InboxDialect.(store.Preparer)}
	},
	"store.Preparer, IsUnavailable": func(n noInbox) store.InboxDialect {
		return sqlNoInboxClassifier{sqlNoInbox{n, n.InboxDialect.(store.Preparer)}, n.InboxDialect.(outageClassifier)}
	},
	"store.Preparer, store.MessageEmitter, outbox.Notifier, store.InboxProcessedAcquirer, store.InboxBatchInserter": func(n noInbox) store.InboxDialect {
		return pgNoInbox{n, n.InboxDialect.(store.Preparer), n.InboxDialect.(store.MessageEmitter), n.InboxDialect.(outbox.Notifier)}
	},
	"store.Preparer, store.MessageEmitter, outbox.Notifier, store.InboxProcessedAcquirer, store.InboxBatchInserter, IsUnavailable": func(n noInbox) store.InboxDialect {
		return pgNoInboxClassifier{pgNoInbox{n, n.InboxDialect.(store.Preparer), n.InboxDialect.(store.MessageEmitter), n.InboxDialect.(outbox.Notifier)}, n.InboxDialect.(outageClassifier)}
	},
}

func noInboxDialect(d store.InboxDialect) store.InboxDialect {
	sig := signature(d, dialectInterfaces)
	mk, ok := dialectShapes[sig]
	if !ok {
		panic(fmt.Sprintf("sabotage: no wrapper keeps the optional interfaces of the dialect %T (%s)", d, sig))
	}
	return mk(noInbox{d})
}

type sqlNoInbox struct {
	noInbox
	store.Preparer
}

type sqlNoInboxClassifier struct {
	sqlNoInbox
	outageClassifier
}

type pgNoInbox struct {
	noInbox
	store.Preparer
	store.MessageEmitter
	outbox.Notifier
}

// The fast paths, broken as the rest: every event is fresh and nothing is
// inserted, so nothing is to forget.

func (pgNoInbox) InboxAcquireProcessed(context.Context, store.Tx, string, txbox.Event) (store.InboxState, int, error) {
	return store.InboxFresh, 0, nil
}

func (pgNoInbox) InboxInsertProcessed(_ context.Context, _ store.Tx, _ string, evs []txbox.Event) ([]bool, error) {
	fresh := make([]bool, len(evs))
	seen := make(map[string]bool, len(evs))
	for i, e := range evs {
		fresh[i] = !seen[e.ID] // of an event given twice, the first, as the store reports
		seen[e.ID] = true
	}
	return fresh, nil
}

func (pgNoInbox) InboxForget(context.Context, store.Tx, string, []string) error { return nil }

type pgNoInboxClassifier struct {
	pgNoInbox
	outageClassifier
}
