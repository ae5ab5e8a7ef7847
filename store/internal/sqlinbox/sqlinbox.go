// Package sqlinbox is the inbox SQL the database/sql stores (MySQL and
// SQLite) share with each other, and the admin side with PostgreSQL: the
// row shape operators list, the counts, the replay statement and what an
// existing row's status means. Each store keeps what differs: upserts,
// locking, and how it stores a timestamp.
package sqlinbox

import (
	"fmt"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// Existing says what an existing row's status means for a delivery of its
// event: PROCESSED or SKIPPED is a duplicate, DEAD is parked; ok is false
// for a row this delivery may run (RETRY, REPLAY, PROCESSING).
func Existing(status string) (state store.InboxState, ok bool) {
	switch txbox.Status(status) {
	case txbox.StatusProcessed, txbox.StatusSkipped:
		return store.InboxDuplicate, true
	case txbox.StatusDead:
		return store.InboxParked, true
	}
	return 0, false
}

// CheckAgain refuses a status InboxFail must not set.
func CheckAgain(dialect string, again txbox.Status) error {
	if again != txbox.StatusRetry && again != txbox.StatusReplay {
		return fmt.Errorf("%s: inbox fail: status %q: want RETRY or REPLAY", dialect, again)
	}
	return nil
}

// Note is InboxDone's note as a nullable parameter: NULL keeps the row's
// error_message.
func Note(note string) *string {
	if note == "" {
		return nil
	}
	return &note
}
