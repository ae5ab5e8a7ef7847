package adminview

import (
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// StatusOrder is the order outbox statuses are listed in.
var StatusOrder = []txbox.Status{txbox.StatusPending, txbox.StatusProcessing, txbox.StatusRetry, txbox.StatusSent, txbox.StatusDead}

// Outbox is the outbox's state as `txbox stats --json` and the console's
// overview show it (both embed it, so its fields are theirs in JSON).
type Outbox struct {
	Counts           map[string]int64 `json:"counts"`
	Backlog          int64            `json:"backlog"`
	Dead             int64            `json:"dead"`
	OldestPendingAt  *time.Time       `json:"oldest_pending_at"`
	OldestPendingAge float64          `json:"oldest_pending_age_seconds"`
}

// OutboxOf reads st: a count for every status, and the backlog, what the
// relays have still to deliver (pending, retry and processing rows).
func OutboxOf(st store.Stats) Outbox {
	v := Outbox{Counts: map[string]int64{}, Dead: st.Dead, OldestPendingAt: st.OldestPending, OldestPendingAge: st.OldestAge.Seconds()}
	for _, k := range StatusOrder {
		v.Counts[string(k)] = st.Counts[k]
	}
	v.Backlog = st.Counts[txbox.StatusPending] + st.Counts[txbox.StatusRetry] + st.Counts[txbox.StatusProcessing]
	return v
}

// Row is what the CLI's and the console's views of an outbox row begin
// with (both embed it, so its fields are theirs in JSON, first).
type Row struct {
	ID               int64  `json:"id"`
	EventID          string `json:"event_id"`
	AggregateType    string `json:"aggregate_type"`
	AggregateID      string `json:"aggregate_id"`
	AggregateVersion int64  `json:"aggregate_version"`
	EventType        string `json:"event_type"`
	Status           string `json:"status"`
	RetryCount       int    `json:"retry_count"`
}

// RowOf is r's Row.
func RowOf(r store.Record) Row {
	return Row{ID: r.ID, EventID: r.EventID, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		AggregateVersion: r.AggregateVersion, EventType: r.EventType, Status: string(r.Status), RetryCount: r.RetryCount}
}
