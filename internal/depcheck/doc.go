// Package depcheck holds a test only: dependencies point one way. The core
// packages (txbox, outbox, relay, inbox, store, broker, pgxtx) never
// depend on an adapter, a database driver or a broker client, and no store
// or broker adapter pulls in another one's driver or client.
package depcheck
