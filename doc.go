// Package txbox makes "save the business change and tell the other services
// about it" one atomic act.
//
// A service writes [Event] values into the outbox table inside the same
// database transaction as its business rows (package outbox). A relay
// (package relay, or the txbox binary) delivers them at least once to a
// broker (package broker and its adapters), keeping per-aggregate order. Each
// consumer runs its handler in a transaction together with an inbox row keyed
// by (event_id, consumer_name) (package inbox), so a redelivered event changes
// nothing twice.
//
// This package holds what every layer shares: the envelope, the status
// machine's names and the error values.
package txbox
