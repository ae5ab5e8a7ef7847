package faults

import (
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store"
)

// consumerSubscriber is the subscriber the consumer process hands the
// inbox: s itself, except in the deliberately broken build the harness must
// catch (sabotage_ack_first.go, build tag txbox_sabotage_ack_first).
var consumerSubscriber = func(s broker.Subscriber) broker.Subscriber { return s }

// skipInboxRecord is nil, except in the broken build that skips the
// inbox's record (sabotage_no_inbox.go, build tag txbox_sabotage_no_inbox):
// there it is sabotage.NoInbox of the store, whatever its transaction type.
var skipInboxRecord func(st any) any

// consumerInbox is the store and configuration the consumer process hands
// the inbox: unchanged, except in the broken build that skips the inbox's
// record, which runs every consumer without the version guard (it would
// drop a redelivery as stale) and so without Ordered (which needs it).
func consumerInbox[T any](st store.InboxStore[T], c inbox.Config) (store.InboxStore[T], inbox.Config) {
	if skipInboxRecord == nil {
		return st, c
	}
	c.VersionGuard, c.Ordered = false, false
	return skipInboxRecord(st).(store.InboxStore[T]), c
}
