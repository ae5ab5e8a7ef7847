package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/pgxtx"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
)

// A latency variant is a pair: how a writer puts event i into its business
// transaction, and the process that delivers it to the stream. Both sides
// of one variant use only what their library offers a user.
type latencyProducer struct {
	proc *child
	// cleanup, if set, runs after proc stopped (the CDC variants drop
	// their replication slot).
	cleanup func()
	// write adds event i to tx and returns the id the delivered message
	// carries as Nats-Msg-Id.
	write func(ctx context.Context, tx pgx.Tx, i int) (string, error)
}

// latencyRelayFlags are the `txbox relay` flags of a txbox variant, before
// the --relay-arg extras: "default" passes none (the relay's defaults,
// which poll), "poll" sets --wakeup poll and the --poll-interval asked,
// "listen" sets --wakeup listen.
func latencyRelayFlags(variant string, pollInterval string) []string {
	switch variant {
	case "listen":
		return []string{"--wakeup", "listen"}
	case "poll":
		return []string{"--wakeup", "poll", "--poll-interval", pollInterval}
	case "cdc", "cdc-tableless":
		return []string{"--mode", "cdc"} // --slot: per run (startTxboxProducer)
	}
	return nil
}

// latencyLabel says exactly what ran, for the table.
func latencyLabel(o latencyOpts) string {
	if o.variant == "watermill" {
		schema := "DefaultPostgreSQLSchema"
		if o.wm.queue() {
			schema = "PostgreSQLQueueSchema + DeleteOnAck"
		}
		return fmt.Sprintf("Watermill forwarder, PollInterval %v, %s, SubscribeBatchSize %d", o.wm.poll, schema, o.wm.batch)
	}
	flags := strings.Join(o.relayFlags, " ")
	// The defaults the relay applied: `txbox relay`'s --wakeup is poll.
	var defaults []string
	if !hasFlag(o.relayFlags, "wakeup") {
		defaults = append(defaults, "--wakeup poll")
	}
	if !hasFlag(o.relayFlags, "poll-interval") {
		defaults = append(defaults, "--poll-interval "+relay.DefaultPollInterval.String())
	}
	label := "relay " + flags
	if flags == "" {
		label = "relay, default flags"
	}
	if len(defaults) > 0 {
		label += " (default " + strings.Join(defaults, " ") + ")"
	}
	switch o.variant {
	case "listen":
		return label + ", writers WithWakeup"
	case "cdc":
		return "relay --mode cdc, rows (plain writers)"
	case "cdc-tableless":
		return "relay --mode cdc, tableless (writers WithCDCMessages)"
	}
	return label + ", plain writers"
}

// startTxboxProducer starts `txbox relay` with the variant's flags; its
// writers use outbox.Writer, with WithWakeup (NOTIFY at commit) for the
// listen variant and plainly otherwise, as a producer writing the table
// contract from its own SQL would.
func startTxboxProducer(e *benchEnv, o latencyOpts) (*latencyProducer, error) {
	flags := o.relayFlags
	var cleanup func()
	if o.variant == "cdc" || o.variant == "cdc-tableless" {
		slot, done, err := cdcSetup(context.Background(), e)
		if err != nil {
			return nil, err
		}
		cleanup = done
		flags = append(slices.Clone(flags), "--slot", slot)
	}
	relayProc, err := startChild("txbox relay", o.bin, append(e.relayArgs(), flags...)...)
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return nil, err
	}
	var opts []outbox.Option
	switch o.variant {
	case "listen":
		opts = append(opts, outbox.WithWakeup())
	case "cdc-tableless":
		opts = append(opts, outbox.WithCDCMessages())
	}
	w := outbox.NewWriter(postgres.Dialect{Tables: e.tables}, opts...)
	return &latencyProducer{proc: relayProc, cleanup: cleanup, write: func(ctx context.Context, tx pgx.Tx, i int) (string, error) {
		ev, err := txbox.NewEvent("Order", "order-"+strconv.Itoa(i%o.aggs), "OrderCreated", payloadFor(i))
		if err != nil {
			return "", err
		}
		return ev.ID, pgxtx.Add(ctx, tx, w, ev)
	}}, nil
}

// startWatermillProducer makes the watermill-sql topic and starts the
// forwarder process (`bench watermill-forwarder`, as drain runs it) on it.
// Its writers publish the way Watermill's outbox is used: in the business
// transaction, a watermill-sql publisher bound to that transaction
// (TxFromPgx), wrapped by forwarder.NewPublisher, which stores the message
// in the forwarder's JSON envelope with its destination topic. The message
// UUID comes back as Nats-Msg-Id (the forwarder's NATS publisher sets
// TrackMsgId).
func startWatermillProducer(e *benchEnv, o latencyOpts) (*latencyProducer, error) {
	if _, err := e.initWatermillTopic(o.wm); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fwd, err := startChild("watermill forwarder", self, e.wmForwarderArgs(o.wm)...)
	if err != nil {
		return nil, err
	}
	schema, _, _ := wmAdapters(o.wm.schema, o.wm.batch)
	topic, dest := e.wmTopic, e.wmDestination()
	return &latencyProducer{proc: fwd, write: func(ctx context.Context, tx pgx.Tx, i int) (string, error) {
		sqlPub, err := wmsql.NewPublisher(wmsql.TxFromPgx(tx), wmsql.PublisherConfig{SchemaAdapter: schema}, wmLogger{})
		if err != nil {
			return "", err
		}
		pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: topic})
		payload, err := json.Marshal(payloadFor(i))
		if err != nil {
			return "", err
		}
		msg := message.NewMessage(watermill.NewUUID(), payload)
		msg.Metadata.Set("aggregate_type", "Order")
		msg.Metadata.Set("aggregate_id", "order-"+strconv.Itoa(i%o.aggs))
		msg.Metadata.Set("event_type", "OrderCreated")
		msg.SetContext(ctx)
		return msg.UUID, pub.Publish(dest, msg)
	}}, nil
}

// hasFlag reports whether args set the flag name, as -name, --name or
// --name=value.
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
