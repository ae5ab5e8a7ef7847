package faults

import (
	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/inbox"
	"github.com/txbox/txbox/store"
)

// consumerSubscriber is the subscriber the consumer process hands the
// inbox: s itself, except in the deliberately broken build the harness must
// catch (sabotage_ack_first.go, build tag txbox_sabotage_ack_first).
var consumerSubscriber = func(s broker.Subscriber) broker.Subscriber { return s }

// consumerInbox is the store and configuration the consumer process hands
// the inbox: unchanged, except in the broken build that skips the inbox's
// record (sabotage_no_inbox.go, build tag txbox_sabotage_no_inbox).
var consumerInbox = func(s store.InboxStore[pgx.Tx], c inbox.Config) (store.InboxStore[pgx.Tx], inbox.Config) { return s, c }
