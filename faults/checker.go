package faults

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is the checker's verdict. It is computed from records the code
// under test never writes: "committed" from the producers' ledger
// (written in the business transaction by the producers' own code),
// "delivered" from the broker's stream read directly, "applied" from the
// consumers' effects table. The outbox tables, which the writer fills and
// the relay moves rows between, are only consulted to say where a lost
// event was left and which events the relay marked as sent.
//
// Each broken guarantee has a signal of its own, so that a sabotaged build
// is caught for its own reason and an unbroken one shows none of them:
//
//   - SentNotInStream: marked as sent, never published (the relay marks
//     before the broker confirmed);
//   - UnappliedInStream: published, never applied by a consumer that had
//     applied everything before it (the inbox acknowledges before its
//     commit);
//   - DoubleEffects: applied twice by one consumer (the inbox's record does
//     not keep effects single);
//   - PublishReorders: an aggregate's version first published after a
//     later one (the relay breaks the aggregate's run).
type Report struct {
	Committed        int // events in the producers' ledger
	Delivered        int // distinct events in the stream
	BrokerDuplicates int // extra copies in the stream

	Consumers []ConsumerReport // per inbox consumer name

	Lost            int // in the ledger, not applied by every consumer (must be 0)
	LostNotInOutbox int // of Lost: in no outbox table (dropped by the writer, or deleted instead of archived)
	Stuck           int // of Lost: still unsent or DEAD in the outbox table
	Dead            int // DEAD rows in the outbox at the end (must be 0: the harness writes no poison event, so any is an outage that spent attempts)
	Parked          int // inbox rows parked (DEAD) at the end (must be 0, likewise)
	Phantom         int // delivered or applied, but in no ledger row (must be 0)
	RolledBackSeen  int // of Phantom: events of transactions rolled back on purpose

	SentNotInStream   int // committed, SENT in the outbox, in no copy in the stream (must be 0)
	UnappliedInStream int // summed over the consumers (must be 0)
	DoubleEffects     int // summed over the consumers (must be 0)
	ConsumerReorders  int // summed over the Ordered consumers (must be 0)
	PublishReorders   int // per-aggregate order violations in the stream's first copies (must be 0)

	MaxDelay      time.Duration // longest commit -> applied, of any consumer
	MaxDelayEvent string
	LostIDs       []string // the first lost event ids
	Examples      []string
	// Diagnosis, when an event was not applied though in the stream: the
	// inbox rows of the first such events and the broker's view of the
	// durables.
	Diagnosis []string
}

// ConsumerReport is one inbox consumer name's figures.
type ConsumerReport struct {
	Name    string
	Ordered bool
	Applied int // distinct events in its effects
	Lost    int // committed, not applied
	// Of Lost: never in the stream; in the stream with every earlier
	// version of its aggregate applied (UnappliedInStream); in the stream
	// but held behind an earlier version the consumer did not apply (an
	// Ordered consumer waits for it: that one's loss, not its own).
	NotInStream       int
	UnappliedInStream int
	HeldBehind        int
	DoubleEffects     int
	// Reorders: per aggregate, an event applied after a higher version.
	// Only an Ordered consumer promises the order; for the others it is
	// not counted.
	Reorders      int
	MaxDelay      time.Duration
	MaxDelayEvent string
}

// Failed lists the violated guarantees.
func (r Report) Failed() []string {
	var f []string
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("lost %d (%d in no outbox table, %d stuck in the outbox)", r.Lost, r.LostNotInOutbox, r.Stuck))
	}
	if r.SentNotInStream > 0 {
		f = append(f, fmt.Sprintf("SENT but never in the stream %d", r.SentNotInStream))
	}
	if r.UnappliedInStream > 0 {
		f = append(f, fmt.Sprintf("in the stream, never applied %d", r.UnappliedInStream))
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
	fmt.Fprintf(&b, "broker duplicates         %d\n", r.BrokerDuplicates)
	fmt.Fprintf(&b, "lost                      %d (in no outbox table %d, stuck in the outbox %d)\n", r.Lost, r.LostNotInOutbox, r.Stuck)
	fmt.Fprintf(&b, "phantom                   %d (of rolled-back transactions %d)\n", r.Phantom, r.RolledBackSeen)
	fmt.Fprintf(&b, "SENT, not in the stream   %d\n", r.SentNotInStream)
	fmt.Fprintf(&b, "in stream, not applied    %d\n", r.UnappliedInStream)
	fmt.Fprintf(&b, "double effects            %d\n", r.DoubleEffects)
	fmt.Fprintf(&b, "DEAD in the outbox        %d\n", r.Dead)
	fmt.Fprintf(&b, "parked in the inbox       %d\n", r.Parked)
	fmt.Fprintf(&b, "order violations consumer %d (Ordered consumers)\n", r.ConsumerReorders)
	fmt.Fprintf(&b, "order violations stream   %d\n", r.PublishReorders)
	fmt.Fprintf(&b, "longest delivery delay    %v (%s)\n", r.MaxDelay.Round(time.Millisecond), r.MaxDelayEvent)
	fmt.Fprintf(&b, "per consumer              applied / lost (not in stream, in stream unapplied, held behind) / double / order violations / longest delay\n")
	for _, c := range r.Consumers {
		order, kind := fmt.Sprint(c.Reorders), "Ordered"
		if !c.Ordered {
			order, kind = "-", "default"
		}
		fmt.Fprintf(&b, "  %-9s %-7s       %d / %d (%d, %d, %d) / %d / %s / %v\n", c.Name, kind, c.Applied, c.Lost,
			c.NotInStream, c.UnappliedInStream, c.HeldBehind, c.DoubleEffects, order, c.MaxDelay.Round(time.Millisecond))
	}
	for _, e := range r.Examples {
		fmt.Fprintf(&b, "  e.g. %s\n", e)
	}
	for _, d := range r.Diagnosis {
		fmt.Fprintf(&b, "  diagnosis: %s\n", d)
	}
	return b.String()
}

// Check reads the ledger, the outbox tables, the stream and the effects
// table. It talks to the database server and the broker directly, never
// through the fault proxies.
func Check(ctx context.Context, w *World, prod *Production) (Report, error) {
	var r Report
	example := func(format string, a ...any) {
		if len(r.Examples) < 10 {
			r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
		}
	}
	committed, err := w.DB.Ledger(ctx)
	if err != nil {
		return r, err
	}
	r.Committed = len(committed)
	// Where each event sits in the outbox tables: its status in the outbox
	// table, or SENT in the archive; absent from both: nowhere.
	where, err := w.DB.Where(ctx)
	if err != nil {
		return r, err
	}
	if r.Dead, r.Parked, err = w.DB.Dead(ctx); err != nil {
		return r, err
	}
	effects, err := w.DB.Effects(ctx)
	if err != nil {
		return r, err
	}
	stream, err := w.Broker.Read(ctx)
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
		if where[id] == "SENT" && !seen[id] {
			r.SentNotInStream++
			example("SENT, not in the stream: %s %s v%d", id, l.aggregate, l.version)
		}
	}

	lost := map[string]bool{}
	var unapplied []string // in the stream, not applied: the first few
	for _, spec := range consumerNames() {
		c := ConsumerReport{Name: spec.Inbox, Ordered: spec.Ordered}
		es := effects[spec.Inbox]
		c.Applied = len(es)
		// The lowest version of each aggregate this consumer did not apply.
		firstGap := map[string]int64{}
		for id, l := range committed {
			if _, ok := es[id]; !ok {
				if v, ok := firstGap[l.aggregate]; !ok || l.version < v {
					firstGap[l.aggregate] = l.version
				}
			}
		}
		for id, l := range committed {
			e, ok := es[id]
			if !ok {
				c.Lost++
				lost[id] = true
				switch {
				case !seen[id]:
					c.NotInStream++
				case spec.Ordered && l.version > firstGap[l.aggregate]:
					c.HeldBehind++
				default:
					c.UnappliedInStream++
					example("in the stream, not applied by %s: %s %s v%d", spec.Inbox, id, l.aggregate, l.version)
					if len(unapplied) < 5 {
						unapplied = append(unapplied, id)
					}
				}
				continue
			}
			if e.n > 1 {
				c.DoubleEffects++
				example("double effect: %s applied %d times by %s", id, e.n, spec.Inbox)
			}
			if d := e.applied.Sub(l.committed); d > c.MaxDelay {
				c.MaxDelay, c.MaxDelayEvent = d, fmt.Sprintf("%s v%d", l.aggregate, l.version)
			}
		}
		if spec.Ordered {
			byAgg := map[string][]effectRow{}
			for _, e := range es {
				byAgg[e.aggregate] = append(byAgg[e.aggregate], e)
			}
			for agg, rows := range byAgg {
				slices.SortFunc(rows, func(a, b effectRow) int { return cmp.Compare(a.seq, b.seq) })
				for i := 1; i < len(rows); i++ {
					if rows[i].version < rows[i-1].version {
						c.Reorders++
						example("consumer %s: %s v%d applied after v%d", spec.Inbox, agg, rows[i].version, rows[i-1].version)
					}
				}
			}
			r.ConsumerReorders += c.Reorders
		}
		r.UnappliedInStream += c.UnappliedInStream
		r.DoubleEffects += c.DoubleEffects
		if c.MaxDelay > r.MaxDelay {
			r.MaxDelay, r.MaxDelayEvent = c.MaxDelay, c.MaxDelayEvent+" at "+c.Name
		}
		r.Consumers = append(r.Consumers, c)
	}
	for _, id := range slices.Sorted(maps.Keys(lost)) {
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
		l := committed[id]
		example("lost: %s %s v%d (outbox: %s, in stream: %v)", id, l.aggregate, l.version, at, seen[id])
	}

	if len(unapplied) > 0 {
		rows, err := w.DB.InboxRows(ctx, unapplied)
		if err != nil {
			return r, err
		}
		for _, id := range unapplied {
			r.Diagnosis = append(r.Diagnosis, fmt.Sprintf("inbox rows of %s: %v", id, rows[id]))
		}
		if d := w.Broker.Diagnose(ctx); d != "" {
			r.Diagnosis = append(r.Diagnosis, d)
		}
	}

	phantoms := map[string]bool{}
	for id := range seen {
		if _, ok := committed[id]; !ok {
			phantoms[id] = true
		}
	}
	for _, es := range effects {
		for id := range es {
			if _, ok := committed[id]; !ok {
				phantoms[id] = true
			}
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
		example("phantom: %s (in stream: %v, outbox: %q)", id, seen[id], where[id])
		break
	}
	return r, nil
}
