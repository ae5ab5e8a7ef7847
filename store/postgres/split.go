package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Splitting the aggregates between relay processes (claimapi.Splitter).
//
// A running relay makes itself known by holding a session advisory lock,
// (splitKey(table), slot) with the lowest free slot, on a connection of its
// own. Every claim reads the granted locks of its table's key from pg_locks
// (the split CTE, splitSQL): with n members, this store the i-th by slot, it
// looks only at aggregates whose hash mod n is i. A member that stops, dies
// or loses its connection loses its lock with that connection, so the next
// claim of every other member counts one fewer and takes over its
// aggregates at once: no heartbeat to miss, no timeout to wait out.
//
// Nothing here is needed for correctness. The row locks keep order and one
// holder per row (queries/lock.sql); a claim whose member lock is not granted to
// this store's connection (lost, or not yet taken) looks at every aggregate,
// as a store that never split does.

// splitConnCheck is how often the member connection is checked; a lost one
// is replaced as soon as the server takes connections again.
const splitConnCheck = time.Second

// maxSlots bounds the slots tried: more relays than this on one table run
// unsplit.
const maxSlots = 1024

type splitter struct {
	mu   sync.Mutex
	refs int
	stop context.CancelFunc
	done chan struct{}
	// arg is the claim's split argument: {key, slot, backend pid} while this
	// store holds its member lock, empty otherwise.
	arg atomic.Pointer[[]int64]
	// members is the number of members last counted (at joining, then at
	// every check of the member connection): only a hint for sizing a
	// claim's window (txclaim.go), since each claim counts them again.
	members atomic.Int64
}

// splitMembers is how many relays share the table's aggregates, as last
// counted; 1 when this store is not a member.
func (s *Store) splitMembers() int {
	if s.split.arg.Load() == nil {
		return 1
	}
	return max(1, int(s.split.members.Load()))
}

// claimAlone is true while this store is a member of the table's split and
// the last count found no other: its claims leave out the busy check
// (queries/window.sql, Alone). A store that is not a member (NoSplit, or
// its member connection lost) cannot know who else claims, and keeps it.
func (s *Store) claimAlone() bool {
	return s.split.arg.Load() != nil && s.split.members.Load() == 1
}

// memberLockSQL tries slot $2 of the table's key $1; unlockAllSQL gives up
// the member lock on leaving.
const (
	memberLockSQL = `SELECT pg_try_advisory_lock($1::int4, $2::int4), pg_backend_pid()`
	unlockAllSQL  = `SELECT pg_advisory_unlock_all()`
)

// countMembersSQL counts the members as each claim does (splitSQL), given
// the split argument of the member connection that runs it.
var countMembersSQL = `WITH ` + splitSQL("$1") + ` SELECT n FROM split`

// splitKey is the advisory-lock key of a table's members: one key per
// table, so relays of two outboxes in one database do not split with each
// other.
func splitKey(table string) int64 {
	h := fnv.New32a()
	h.Write([]byte("txbox split " + table))
	return int64(h.Sum32() & 0x7fffffff)
}

// splitArg is the argument claims pass to splitSQL.
func (s *Store) splitArg() []int64 {
	if a := s.split.arg.Load(); a != nil {
		return *a
	}
	return []int64{}
}

// Split implements claimapi.Splitter. It takes a member lock before it returns
// (or returns the error, and claims stay unsplit); a background check
// replaces the member connection if it is lost. Options.NoSplit makes it a
// no-op: through a pooler in transaction or statement mode the session lock
// would stay on a server connection after this store left, and the other
// members would keep leaving that share to nobody.
func (s *Store) Split(ctx context.Context) (leave func(), err error) {
	if s.opts.NoSplit {
		return func() {}, nil
	}
	sp := &s.split
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.refs++
	if sp.refs == 1 {
		conn, err := s.joinSplit(ctx)
		if err != nil {
			sp.refs--
			return nil, err
		}
		kctx, cancel := context.WithCancel(context.Background())
		sp.stop, sp.done = cancel, make(chan struct{})
		go s.keepSplit(kctx, conn, sp.done)
	}
	var once sync.Once
	return func() { once.Do(s.leaveSplit) }, nil
}

func (s *Store) leaveSplit() {
	sp := &s.split
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.refs == 0 { // Close ended the membership
		return
	}
	sp.refs--
	if sp.refs == 0 {
		sp.end()
	}
}

// closeSplit ends the membership, if any, when the store closes.
func (s *Store) closeSplit() {
	sp := &s.split
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.refs > 0 {
		sp.refs = 0
		sp.end()
	}
}

// end stops the member connection's keeper; the lock is released when it
// returns. Called with mu held.
func (sp *splitter) end() {
	sp.arg.Store(nil)
	sp.stop()
	<-sp.done
}

// joinSplit connects and takes the lowest free slot.
func (s *Store) joinSplit(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: split: connect: %w", err)
	}
	key := splitKey(s.q.table)
	for slot := int64(0); slot < maxSlots; slot++ {
		var got bool
		var pid int64
		// The backend's own pid, read in the locking statement: the one
		// pg_locks shows as the holder.
		if err := conn.QueryRow(ctx, memberLockSQL, key, slot).Scan(&got, &pid); err != nil {
			_ = conn.Close(context.Background())
			return nil, fmt.Errorf("postgres: split: %w", err)
		}
		if got {
			arg := []int64{key, slot, pid}
			var n int64
			if err := conn.QueryRow(ctx, countMembersSQL, arg).Scan(&n); err != nil {
				_ = conn.Close(context.Background())
				return nil, fmt.Errorf("postgres: split: %w", err)
			}
			s.split.members.Store(n)
			s.split.arg.Store(&arg)
			s.log.Debug("txbox: split: member", "table", s.q.table, "slot", slot)
			return conn, nil
		}
	}
	_ = conn.Close(context.Background())
	return nil, errors.New("postgres: split: every slot is taken")
}

// keepSplit checks the member connection until ctx ends, then closes it,
// which releases the lock. A lost connection empties the split argument at
// once (claims go unsplit) and is replaced at the next check that can
// connect.
func (s *Store) keepSplit(ctx context.Context, conn *pgx.Conn, done chan struct{}) {
	defer close(done)
	defer func() {
		if conn != nil {
			// Unlocked before the close: a closed connection's backend
			// releases its locks only as it exits, after Close returned,
			// and the others' next claims must count one fewer at once.
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = conn.Exec(uctx, unlockAllSQL)
			cancel()
			_ = conn.Close(context.Background())
		}
	}()
	t := time.NewTicker(splitConnCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if conn == nil {
			c, err := s.joinSplit(ctx)
			if err != nil {
				continue
			}
			conn = c
			s.log.Info("txbox: split: rejoined the relays of the table", "table", s.q.table)
			continue
		}
		// Counting the members doubles as the connection's check.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var n int64
		err := conn.QueryRow(pctx, countMembersSQL, s.splitArg()).Scan(&n)
		cancel()
		if err == nil {
			s.split.members.Store(n)
		}
		if err != nil && ctx.Err() == nil {
			s.split.arg.Store(nil)
			_ = conn.Close(context.Background())
			conn = nil
			s.log.Warn("txbox: split: lost the member connection; claiming every aggregate until it is back", "table", s.q.table, "err", err)
		}
	}
}

// splitSQL is the split CTE for a claim whose split argument is param:
// n, the members of the table (1 when this store is not one of them), and
// i, this store's rank among them.
func splitSQL(param string) string {
	return `split AS (
	SELECT CASE WHEN count(*) > 1 AND bool_or(l.objid::int8 = p.a[2] AND l.pid = p.a[3]) THEN count(*) ELSE 1 END AS n,
		count(*) FILTER (WHERE l.objid::int8 < p.a[2]) AS i
	FROM (SELECT ` + param + `::int8[] AS a) p
	JOIN pg_locks l ON cardinality(p.a) = 3 AND l.locktype = 'advisory' AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid::int8 = p.a[1] AND l.objsubid = 2
)`
}

// inSplit is true for a row of alias whose aggregate is this store's share.
// A CASE, not an OR: the planner gives an OR of two equalities a
// selectivity of about 1%, and a scan in id order with such a filter (the
// fallback's heads) then becomes a read and sort of the whole backlog; a
// CASE gets the default 50%. (The window applies it after its LIMIT, so
// its scan stays bounded: window.sql.)
func inSplit(alias string) string {
	return `CASE WHEN (SELECT n FROM split) = 1 THEN true
		ELSE abs(hashtext(` + alias + `.aggregate_type || '/' || ` + alias + `.aggregate_id)::int8) % (SELECT n FROM split) = (SELECT i FROM split) END`
}
