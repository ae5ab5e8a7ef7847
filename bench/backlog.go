package main

import (
	"context"
	"fmt"
	"math/rand/v2"
)

// payloadSQL builds, for row g of a backlog written by the database, the
// same JSON document as payloadFor(g).
const payloadSQL = `json_build_object('seq', g, 'customer', 'c-' || (g % 997), 'note', repeat('x', 240))`

// writeBacklog runs insert, a statement writing a backlog into table, then
// ANALYZE on table, so that the drain's queries are planned for the
// backlog; what names the backlog in an insert's error.
func (e *benchEnv) writeBacklog(ctx context.Context, what, table, insert string, args ...any) error {
	if _, err := e.pool.Exec(ctx, insert, args...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, err := e.pool.Exec(ctx, `ANALYZE `+table)
	return err
}

// ordersInsert is the INSERT into the txbox outbox table of one
// OrderCreated event with payloadSQL's document for each row g of from, on
// aggregate 'order-' || key; headers, when not empty, is the SQL of each
// row's headers.
func (e *benchEnv) ordersInsert(key, headers, from string) string {
	cols, vals := "", ""
	if headers != "" {
		cols, vals = ", headers", ",\n\t\t       "+headers
	}
	return `INSERT INTO ` + e.tables.Outbox + ` (event_id, aggregate_type, aggregate_id, event_type, payload` + cols + `)
		SELECT gen_random_uuid()::text, 'Order', 'order-' || ` + key + `, 'OrderCreated',
		       ` + payloadSQL + vals + `
		FROM ` + from
}

// writeTxboxBacklog writes a backlog of events with ~300-byte JSON payloads
// into the txbox outbox table, spread over aggs aggregates in write order,
// by the database itself so the setup takes seconds.
func (e *benchEnv) writeTxboxBacklog(ctx context.Context, events, aggs int) error {
	return e.writeBacklog(ctx, "backlog", e.tables.Outbox,
		e.ordersInsert(`(g % $2)`, "", `generate_series(1, $1) g`), events, aggs)
}

// writeTxboxLayout writes drain's backlog with the layout's keys.
func (e *benchEnv) writeTxboxLayout(ctx context.Context, events int, l layout) error {
	if !l.zipf {
		return e.writeTxboxBacklog(ctx, events, l.aggs)
	}
	rng := rand.New(rand.NewPCG(1, 1)) // the same backlog every run
	z := rand.NewZipf(rng, 1.1, 1, uint64(l.aggs-1))
	keys := make([]int32, events)
	for i := range keys {
		keys[i] = int32(z.Uint64())
	}
	return e.writeBacklog(ctx, "zipf backlog", e.tables.Outbox,
		e.ordersInsert(`k`, "", `unnest($1::int[]) WITH ORDINALITY AS u(k, g) ORDER BY g`), keys)
}
