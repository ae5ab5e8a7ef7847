package faults

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Report is the checker's verdict. "Committed" comes from the producers'
// ledger (ledgerDDL), written in the business transaction by the
// producers' own code: the outbox tables, which the writer fills and the
// relay moves rows between, are only consulted to say where a lost event
// was left.
type Report struct {
	Committed        int           // events in the producers' ledger
	Delivered        int           // distinct events in the stream
	Applied          int           // distinct events in the consumers' effects table
	Lost             int           // in the ledger, never applied (must be 0)
	LostNotInOutbox  int           // of Lost: in no outbox table (dropped by the writer, or deleted instead of archived)
	Stuck            int           // of Lost: still unsent or DEAD in the outbox table
	Dead             int           // DEAD rows in the outbox at the end (must be 0: the harness writes no poison event, so any is an outage that spent attempts)
	Parked           int           // inbox rows parked (DEAD) at the end (must be 0, likewise)
	Phantom          int           // delivered or applied, but in no ledger row (must be 0)
	RolledBackSeen   int           // of Phantom: events of transactions rolled back on purpose
	BrokerDuplicates int           // extra copies in the stream
	DoubleEffects    int           // events applied more than once (must be 0)
	ConsumerReorders int           // per-aggregate order violations at the consumer (must be 0)
	PublishReorders  int           // per-aggregate order violations in the stream's first copies (must be 0)
	MaxDelay         time.Duration // longest commit -> applied
	MaxDelayEvent    string
	LostIDs          []string // the first lost event ids
	Examples         []string
}

// Failed lists the violated guarantees.
func (r Report) Failed() []string {
	var f []string
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("lost %d (%d in no outbox table, %d stuck in the outbox)", r.Lost, r.LostNotInOutbox, r.Stuck))
	}
	if r.Phantom > 0 {
		f = append(f, fmt.Sprintf("phantom %d (%d of rolled-back transactions)", r.Phantom, r.RolledBackSeen))
	}
	if r.DoubleEffects > 0 {
		f = append(f, fmt.Sprintf("double effects %d", r.DoubleEffects))
	}
	if r.Dead > 0 {
		f = append(f, fmt.Sprintf("DEAD %d", r.Dead))
	}
	if r.Parked > 0 {
		f = append(f, fmt.Sprintf("parked %d", r.Parked))
	}
	if r.ConsumerReorders > 0 {
		f = append(f, fmt.Sprintf("order violations at the consumer %d", r.ConsumerReorders))
	}
	if r.PublishReorders > 0 {
		f = append(f, fmt.Sprintf("order violations in the stream %d", r.PublishReorders))
	}
	return f
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "committed (ledger)        %d\n", r.Committed)
	fmt.Fprintf(&b, "delivered (distinct)      %d\n", r.Delivered)
	fmt.Fprintf(&b, "applied (distinct)        %d\n", r.Applied)
	fmt.Fprintf(&b, "lost                      %d (in no outbox table %d, stuck in the outbox %d)\n", r.Lost, r.LostNotInOutbox, r.Stuck)
	fmt.Fprintf(&b, "phantom                   %d (of rolled-back transactions %d)\n", r.Phantom, r.RolledBackSeen)
	fmt.Fprintf(&b, "broker duplicates         %d\n", r.BrokerDuplicates)
	fmt.Fprintf(&b, "double effects            %d\n", r.DoubleEffects)
	fmt.Fprintf(&b, "DEAD in the outbox        %d\n", r.Dead)
	fmt.Fprintf(&b, "parked in the inbox       %d\n", r.Parked)
	fmt.Fprintf(&b, "order violations consumer %d\n", r.ConsumerReorders)
	fmt.Fprintf(&b, "order violations stream   %d\n", r.PublishReorders)
	fmt.Fprintf(&b, "longest delivery delay    %v (%s)\n", r.MaxDelay.Round(time.Millisecond), r.MaxDelayEvent)
	for _, e := range r.Examples {
		fmt.Fprintf(&b, "  e.g. %s\n", e)
	}
	return b.String()
}

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

// Check reads the ledger, the outbox tables, the stream and the effects
// table. It talks to the databases and the nats-server directly, never
// through the fault proxies.
func Check(ctx context.Context, w *World, prod *Production) (Report, error) {
	var r Report
	example := func(format string, a ...any) {
		if len(r.Examples) < 10 {
			r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
		}
	}
	committed := map[string]ledgerRow{}
	rows, err := w.Prod.Query(ctx, `SELECT event_id, aggregate_id, version, committed_at FROM ledger`)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var id string
		var l ledgerRow
		if err := rows.Scan(&id, &l.aggregate, &l.version, &l.committed); err != nil {
			return r, err
		}
		committed[id] = l
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}
	r.Committed = len(committed)

	// Where each event sits in the outbox tables: its status in the outbox
	// table, or SENT in the archive; absent from both: nowhere.
	where := map[string]string{}
	rows, err = w.Prod.Query(ctx, `SELECT event_id, status FROM outbox_event UNION ALL SELECT event_id, 'SENT' FROM outbox_event_sent`)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return r, err
		}
		if where[id] == "" || st != "SENT" {
			where[id] = st
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}

	if err := w.Prod.QueryRow(ctx, `SELECT count(*) FROM outbox_event WHERE status = 'DEAD'`).Scan(&r.Dead); err != nil {
		return r, err
	}
	if err := w.Cons.QueryRow(ctx, `SELECT count(*) FROM inbox_event WHERE status = 'DEAD'`).Scan(&r.Parked); err != nil {
		return r, err
	}

	effects := map[string]effectRow{}
	rows, err = w.Cons.Query(ctx, `SELECT event_id, aggregate_id, version, applied_seq, applied_at, n FROM effects`)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var id string
		var e effectRow
		if err := rows.Scan(&id, &e.aggregate, &e.version, &e.seq, &e.applied, &e.n); err != nil {
			return r, err
		}
		effects[id] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}
	r.Applied = len(effects)

	stream, err := readStream(ctx, w)
	if err != nil {
		return r, err
	}
	seen := map[string]bool{}
	lastVersion := map[string]int64{}
	for _, m := range stream {
		if seen[m.id] {
			r.BrokerDuplicates++
			continue
		}
		seen[m.id] = true
		l, ok := committed[m.id]
		if !ok {
			continue // a phantom, counted below
		}
		if l.version < lastVersion[l.aggregate] {
			r.PublishReorders++
			example("stream: %s v%d first published after v%d", l.aggregate, l.version, lastVersion[l.aggregate])
		}
		lastVersion[l.aggregate] = max(lastVersion[l.aggregate], l.version)
	}
	r.Delivered = len(seen)

	for id, l := range committed {
		e, ok := effects[id]
		if !ok {
			r.Lost++
			if len(r.LostIDs) < 100 {
				r.LostIDs = append(r.LostIDs, id)
			}
			at := where[id]
			switch at {
			case "":
				r.LostNotInOutbox++
				at = "in no outbox table"
			case "SENT":
			default:
				r.Stuck++
			}
			example("lost: %s %s v%d (outbox: %s, in stream: %v)", id, l.aggregate, l.version, at, seen[id])
			continue
		}
		if e.n > 1 {
			r.DoubleEffects++
			example("double effect: %s applied %d times", id, e.n)
		}
		if d := e.applied.Sub(l.committed); d > r.MaxDelay {
			r.MaxDelay, r.MaxDelayEvent = d, fmt.Sprintf("%s v%d", l.aggregate, l.version)
		}
	}
	phantoms := map[string]bool{}
	for id := range seen {
		if _, ok := committed[id]; !ok {
			phantoms[id] = true
		}
	}
	for id := range effects {
		if _, ok := committed[id]; !ok {
			phantoms[id] = true
		}
	}
	r.Phantom = len(phantoms)
	if prod != nil {
		prod.mu.Lock()
		for id := range phantoms {
			if prod.RolledBack[id] {
				r.RolledBackSeen++
			}
		}
		prod.mu.Unlock()
	}
	for id := range phantoms {
		example("phantom: %s (in stream: %v, applied: %v, outbox: %q)", id, seen[id], effects[id].n > 0, where[id])
		break
	}

	byAgg := map[string][]effectRow{}
	for _, e := range effects {
		byAgg[e.aggregate] = append(byAgg[e.aggregate], e)
	}
	for agg, es := range byAgg {
		slices.SortFunc(es, func(a, b effectRow) int { return cmp.Compare(a.seq, b.seq) })
		for i := 1; i < len(es); i++ {
			if es[i].version < es[i-1].version {
				r.ConsumerReorders++
				example("consumer: %s v%d applied after v%d", agg, es[i].version, es[i-1].version)
			}
		}
	}
	return r, nil
}

type streamMsg struct{ id string }

func readStream(ctx context.Context, w *World) ([]streamMsg, error) {
	// Streams the stream-recreated fault deleted come first: what they
	// held was delivered, and their order counts.
	w.mu.Lock()
	deleted := slices.Clone(w.deleted)
	w.mu.Unlock()
	live, err := readLiveStream(ctx, w)
	return append(deleted, live...), err
}

// readLiveStream reads the stream as it is now.
func readLiveStream(ctx context.Context, w *World) ([]streamMsg, error) {
	nc, err := nats.Connect(w.NATS.URL)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, w.Stream)
	if err != nil {
		return nil, err
	}
	total := st.CachedInfo().State.Msgs
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var out []streamMsg
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, streamMsg{id: m.Headers().Get("ce-id")})
			n++
		}
		if n == 0 {
			return out, fmt.Errorf("stream read stalled at %d of %d", len(out), total)
		}
	}
	return out, nil
}
