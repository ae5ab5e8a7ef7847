package console

import (
	"time"

	"github.com/txbox/txbox/internal/adminview"
	"github.com/txbox/txbox/store"
)

// The views below are what both the pages and the API show: one function
// reads the store, the page renders the struct and the API encodes it.

type recordView struct {
	adminview.Row
	OccurredAt  time.Time  `json:"occurred_at"`
	CreatedAt   time.Time  `json:"created_at"`
	SentAt      *time.Time `json:"sent_at,omitempty"`
	NextRetryAt *time.Time `json:"next_retry_at,omitempty"`
	LockedBy    string     `json:"locked_by,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	Headers     jsonBytes  `json:"headers,omitempty"`
	Payload     jsonBytes  `json:"payload,omitempty"`
}

// jsonBytes is stored JSON (or not: a foreign producer may write
// anything); the API emits it as JSON or as a string, the pages pretty.
type jsonBytes []byte

func (b jsonBytes) MarshalJSON() ([]byte, error) { return adminview.RawJSON(b), nil }

func view(r store.Record, full bool) recordView {
	v := recordView{Row: adminview.RowOf(r), OccurredAt: r.OccurredAt, CreatedAt: r.CreatedAt, SentAt: r.SentAt, NextRetryAt: r.NextRetryAt,
		LockedBy: r.LockedBy, LastError: redact(r.LastError)}
	if full {
		v.Headers, v.Payload = r.Headers, r.Payload
	}
	return v
}
