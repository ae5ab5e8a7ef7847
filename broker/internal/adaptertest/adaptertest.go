// Package adaptertest is what the broker adapters' own tests share beyond
// the conformance suite (brokertest): names and messages, opening an
// adapter for one test, and the checks several adapters make the same way.
package adaptertest

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
)

// Quiet is the logger the tests give adapters: their connection events
// would only bury a failure's output.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Unique returns prefix and a number no other test run uses, for the
// streams, topics, queues and client ids of a shared server.
func Unique(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1e12)
}

// Msg is a message on topic with a valid event of aggregate key whose
// payload is {"n":n}, so that order and identity can be checked on the
// other side.
func Msg(topic, key string, n int) broker.Message {
	return broker.Message{Event: txbox.MustEvent("Order", key, "Created", map[string]int{"n": n}), Topic: topic, Source: "test"}
}

// TraceParent is a valid W3C traceparent, the extension attribute the
// wire-format tests carry.
const TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Full is Msg with every optional attribute set (an aggregate version, a
// traceparent), for the tests of what a foreign consumer sees.
func Full(topic, key string, n int) broker.Message {
	m := Msg(topic, key, n)
	m.Event.AggregateVersion = 3
	m.Event.Headers = map[string]string{"traceparent": TraceParent}
	return m
}
