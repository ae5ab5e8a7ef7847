package faults

import "github.com/txbox/txbox/broker"

// consumerSubscriber is the subscriber the consumer process hands the
// inbox: s itself, except in the deliberately broken build the harness must
// catch (sabotage_ack_first.go, build tag txbox_sabotage_ack_first).
var consumerSubscriber = func(s broker.Subscriber) broker.Subscriber { return s }
