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
//
// # Configuration
//
// One configuration style per kind of package:
//   - the long-running parts, relay and inbox, take a Config struct:
//     zero fields take the exported Default* constants, WithDefaults shows
//     the effective values and Validate names the first bad field (a
//     *ConfigError);
//   - adapters (store/postgres, broker/nats, ...) take an Options struct
//     when opened; the zero value is usable (the in-memory test broker,
//     broker/mem, keeps functional options);
//   - the outbox writer, a value made once and used inline, takes
//     functional options (outbox.WithWakeup).
//
// # Dependencies
//
// Dependencies point one way: the core packages (txbox, outbox, relay,
// inbox, store, broker, pgxtx) import no adapter, database driver or broker
// client; a program compiles only the adapters it imports. Broker adapters
// are named <folder>broker (package natsbroker in broker/nats, membroker in
// broker/mem), so that they do not shadow the client libraries they wrap;
// store adapters are named after their folder (package postgres in
// store/postgres).
package txbox
