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

// Report is the checker's verdict.
type Report struct {
	Committed        int           // events in the producers' outbox
	Delivered        int           // distinct events in the stream
	Applied          int           // distinct events in the consumers' effects table
	Lost             int           // committed, never applied (must be 0)
	RolledBackSeen   int           // events of rolled-back transactions seen anywhere (must be 0)
	BrokerDuplicates int           // extra copies in the stream
	DoubleEffects    int           // events applied more than once (must be 0)
	ConsumerReorders int           // per-aggregate order violations at the consumer (must be 0)
	PublishReorders  int           // per-aggregate order violations in the stream's first copies
	MaxDelay         time.Duration // longest commit -> applied
	MaxDelayEvent    string
	Examples         []string
}

// Failed lists the violated guarantees.
func (r Report) Failed() []string {
	var f []string
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("lost %d", r.Lost))
	}
	if r.RolledBackSeen > 0 {
		f = append(f, fmt.Sprintf("rolled-back events delivered %d", r.RolledBackSeen))
	}
	if r.DoubleEffects > 0 {
		f = append(f, fmt.Sprintf("double effects %d", r.DoubleEffects))
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
	fmt.Fprintf(&b, "committed events          %d\n", r.Committed)
	fmt.Fprintf(&b, "delivered (distinct)      %d\n", r.Delivered)
	fmt.Fprintf(&b, "applied (distinct)        %d\n", r.Applied)
	fmt.Fprintf(&b, "lost                      %d\n", r.Lost)
	fmt.Fprintf(&b, "rolled-back delivered     %d\n", r.RolledBackSeen)
	fmt.Fprintf(&b, "broker duplicates         %d\n", r.BrokerDuplicates)
	fmt.Fprintf(&b, "double effects            %d\n", r.DoubleEffects)
	fmt.Fprintf(&b, "order violations consumer %d\n", r.ConsumerReorders)
	fmt.Fprintf(&b, "order violations stream   %d\n", r.PublishReorders)
	fmt.Fprintf(&b, "longest delivery delay    %v (%s)\n", r.MaxDelay.Round(time.Millisecond), r.MaxDelayEvent)
	for _, e := range r.Examples {
		fmt.Fprintf(&b, "  e.g. %s\n", e)
	}
	return b.String()
}

type outboxRow struct {
	aggregate string
	version   int64
	created   time.Time
}

type effectRow struct {
	aggregate string
	version   int64
	seq       int64
	applied   time.Time
	n         int
}

// Check reads the three sources of truth. It talks to the databases and the
// nats-server directly, never through the fault proxies.
func Check(ctx context.Context, w *World, prod *Production) (Report, error) {
	var r Report
	example := func(format string, a ...any) {
		if len(r.Examples) < 10 {
			r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
		}
	}
	committed := map[string]outboxRow{}
	// Delivered rows live in the archive, the rest in the outbox table.
	rows, err := w.Prod.Query(ctx, `SELECT event_id, aggregate_id, aggregate_version, created_at FROM outbox_event
		UNION ALL SELECT event_id, aggregate_id, aggregate_version, created_at FROM outbox_event_sent`)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var id string
		var o outboxRow
		if err := rows.Scan(&id, &o.aggregate, &o.version, &o.created); err != nil {
			return r, err
		}
		committed[id] = o
	}
	rows.Close()
	r.Committed = len(committed)

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
		o, ok := committed[m.id]
		if !ok {
			continue
		}
		if o.version < lastVersion[o.aggregate] {
			r.PublishReorders++
			example("stream: %s v%d first published after v%d", o.aggregate, o.version, lastVersion[o.aggregate])
		}
		lastVersion[o.aggregate] = max(lastVersion[o.aggregate], o.version)
	}
	r.Delivered = len(seen)

	for id, o := range committed {
		e, ok := effects[id]
		if !ok {
			r.Lost++
			example("lost: %s %s v%d (in stream: %v)", id, o.aggregate, o.version, seen[id])
			continue
		}
		if e.n > 1 {
			r.DoubleEffects++
			example("double effect: %s applied %d times", id, e.n)
		}
		if d := e.applied.Sub(o.created); d > r.MaxDelay {
			r.MaxDelay, r.MaxDelayEvent = d, fmt.Sprintf("%s v%d", o.aggregate, o.version)
		}
	}
	prod.mu.Lock()
	for id := range prod.RolledBack {
		if _, ok := committed[id]; ok || seen[id] || effects[id].n > 0 {
			r.RolledBackSeen++
			example("rolled back but seen: %s", id)
		}
	}
	prod.mu.Unlock()

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
