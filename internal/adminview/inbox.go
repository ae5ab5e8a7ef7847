package adminview

import (
	"time"

	"github.com/txbox/txbox/store"
)

// InboxState is where an inbox row stands, as the CLI's and the console's
// views of the row show it (both embed it after the event id and the
// consumer, so its fields are theirs in JSON, there).
type InboxState struct {
	EventType   string     `json:"event_type"`
	Status      string     `json:"status"`
	RetryCount  int        `json:"retry_count"`
	ReceivedAt  time.Time  `json:"received_at"`
	ProcessedAt *time.Time `json:"processed_at,omitempty"`
	Error       string     `json:"error_message,omitempty"`
}

// InboxStateOf is r's InboxState.
func InboxStateOf(r store.InboxRow) InboxState {
	return InboxState{EventType: r.EventType, Status: string(r.Status), RetryCount: r.RetryCount, ReceivedAt: r.ReceivedAt,
		ProcessedAt: r.ProcessedAt, Error: r.ErrorMessage}
}
