package main

// The Watermill contender of `drain`: Watermill's forwarder component
// (github.com/ThreeDotsLabs/watermill/components/forwarder), reading its
// envelopes from a watermill-sql PostgreSQL topic table and publishing them
// to JetStream through watermill-nats. It runs as a child process of its own
// (`bench watermill-forwarder`), like `txbox relay`, so its RSS and CPU are
// read from /proc the same way.

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for --wm-driver stdlib
)

type wmOpts struct {
	batch    int
	perTx    int // asked: events per writing transaction id; 0 = one id for all
	effPerTx int // used in the last backlog (raised when the database has too few past xids)
	poll     time.Duration
	driver   string
	schema   string // "default" (or ""), or "queue": PostgreSQLQueueSchema + DeleteOnAck
	// cpuProfile, when set, is the file the forwarder process writes its
	// CPU profile to (pprof format) when it stops.
	cpuProfile string
}

func (w wmOpts) queue() bool { return w.schema == "queue" }

func (w wmOpts) check() error {
	if w.schema != "" && w.schema != "default" && w.schema != "queue" {
		return fmt.Errorf("--wm-schema %q: want default or queue", w.schema)
	}
	return nil
}

// wmAdapters are the subscriber's schema and offsets adapters for the
// schema chosen, and the consumer group it takes (the queue schema has
// none: it marks or deletes rows instead).
func wmAdapters(schema string, batch int) (wmsql.SchemaAdapter, wmsql.OffsetsAdapter, string) {
	if schema == "queue" {
		return wmsql.PostgreSQLQueueSchema{SubscribeBatchSize: batch}, wmsql.PostgreSQLQueueOffsetsAdapter{DeleteOnAck: true}, ""
	}
	return wmSchema(batch), wmsql.DefaultPostgreSQLOffsetsAdapter{}, "bench"
}

func (w wmOpts) describe() string {
	if w.queue() {
		return fmt.Sprintf("forwarder, watermill-sql v4 PostgreSQLQueueSchema{SubscribeBatchSize: %d} + PostgreSQLQueueOffsetsAdapter{DeleteOnAck: true} via %s, PollInterval %v; watermill-nats v2 JetStream publisher, NATSMarshaler, TrackMsgId",
			w.batch, w.driver, w.poll)
	}
	perTx := "all events in one transaction id"
	if w.perTx > 0 {
		perTx = fmt.Sprintf("%d event(s) per transaction id", w.effPerTx)
		if w.effPerTx != w.perTx {
			perTx += fmt.Sprintf(" (asked %d; the database has too few past transaction ids)", w.perTx)
		}
	}
	return fmt.Sprintf("forwarder, watermill-sql v4 DefaultPostgreSQLSchema{SubscribeBatchSize: %d} + DefaultPostgreSQLOffsetsAdapter via %s, PollInterval %v; watermill-nats v2 JetStream publisher, NATSMarshaler, TrackMsgId; backlog: %s",
		w.batch, w.driver, w.poll, perTx)
}

func wmSchema(batch int) wmsql.DefaultPostgreSQLSchema {
	return wmsql.DefaultPostgreSQLSchema{SubscribeBatchSize: batch}
}

// wmDestination is the NATS subject every forwarded event goes to: inside
// the env's stream, as txbox's topic template renders it.
func (e *benchEnv) wmDestination() string { return e.prefix + ".Order.OrderCreated" }

// writeWatermillBacklog makes the forwarder's SQL topic with Watermill's own
// schema-initialising queries and writes the backlog into it in Watermill's
// format, by the database itself: each row is what
// forwarder.NewPublisher(sqlPublisher).Publish(destination, msg) stores, a
// JSON envelope {"destination_topic", "uuid", "payload" (base64 of the
// event's ~300-byte JSON, as encoding/json writes []byte), "metadata"}.
//
// Watermill orders and hides rows by transaction_id (xid8): a row is read
// only once transaction_id < pg_snapshot_xmin(pg_current_snapshot()), and
// rows are read in (transaction_id, offset) order. Producers write events in
// their own business transactions, so by default each event gets a
// transaction id of its own, taken from ids the database has already
// finished (below the current xmin), in write order. wm.perTx = 0 instead
// leaves every row in the inserting transaction's own id, which is what
// publishing the whole backlog in one transaction would store.
func (e *benchEnv) writeWatermillBacklog(ctx context.Context, o drainOpts, wm *wmOpts) error {
	table, err := e.initWatermillTopic(*wm)
	if err != nil {
		return err
	}
	args := []any{o.events, o.aggs, e.wmDestination()}
	// The queue schema has no transaction ids: its rows go in offset order
	// (it reads the unacked rows FOR UPDATE and deletes them on ack).
	what, txCol, txID := "watermill queue backlog", "", ""
	if !wm.queue() {
		what, txCol = "watermill backlog", ", transaction_id"
		if txID, err = e.wmTransactionIDs(ctx, o, wm, &args); err != nil {
			return err
		}
		txID = ",\n\t\t       " + txID
	}
	return e.writeBacklog(ctx, what, table, `INSERT INTO `+table+` (uuid, payload, metadata`+txCol+`)
		SELECT gen_random_uuid()::text,
		       json_build_object(
		           'destination_topic', $3::text,
		           'uuid', gen_random_uuid()::text,
		           'payload', translate(encode(convert_to(p.doc::text, 'UTF8'), 'base64'), E'\n', ''),
		           'metadata', json_build_object('aggregate_type', 'Order', 'aggregate_id', 'order-' || (g % $2), 'event_type', 'OrderCreated')),
		       '{}'::json`+txID+`
		FROM generate_series(1, $1) g,
		     LATERAL (SELECT `+payloadSQL+` AS doc) p
		ORDER BY g`, args...)
}

// wmTransactionIDs is the SQL of row g's transaction_id in the default
// schema's backlog, appending the arguments it takes to args: with
// wm.perTx, past ids below the current xmin, wm.perTx rows each (more where
// the database has too few; wm.effPerTx says how many); without, the
// inserting transaction's own.
func (e *benchEnv) wmTransactionIDs(ctx context.Context, o drainOpts, wm *wmOpts, args *[]any) (string, error) {
	if wm.perTx == 0 {
		return `pg_current_xact_id()`, nil
	}
	var xmin int64
	if err := e.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&xmin); err != nil {
		return "", err
	}
	perTx := wm.perTx
	if avail := int(xmin) - 2; (o.events+perTx-1)/perTx > avail {
		if avail < 1 {
			return "", fmt.Errorf("watermill backlog: the database has no past transaction ids (xmin %d)", xmin)
		}
		perTx = (o.events + avail - 1) / avail
	}
	ntx := (o.events + perTx - 1) / perTx
	wm.effPerTx = perTx
	*args = append(*args, xmin-int64(ntx), perTx) // the last id is xmin-1
	return `($4::bigint + (g - 1) / $5)::text::xid8`, nil
}

// initWatermillTopic makes this env's watermill-sql topic (e.wmTopic) for
// wm's schema with Watermill's own schema-initialising queries, and returns
// its messages table; close drops its tables.
func (e *benchEnv) initWatermillTopic(wm wmOpts) (string, error) {
	topic := "bench_wm_" + e.sfx
	schema, offsets, _ := wmAdapters(wm.schema, wm.batch)
	var table string
	if wm.queue() {
		table = schema.(wmsql.PostgreSQLQueueSchema).MessagesTable(topic)
		e.extra = append(e.extra, table)
	} else {
		table = schema.(wmsql.DefaultPostgreSQLSchema).MessagesTable(topic)
		e.extra = append(e.extra, table, offsets.(wmsql.DefaultPostgreSQLOffsetsAdapter).MessagesOffsetsTable(topic))
	}
	sub, err := wmsql.NewSubscriber(wmsql.BeginnerFromPgx(e.pool), wmsql.SubscriberConfig{SchemaAdapter: schema, OffsetsAdapter: offsets}, wmLogger{})
	if err != nil {
		return "", err
	}
	err = sub.SubscribeInitialize(topic)
	_ = sub.Close()
	if err != nil {
		return "", fmt.Errorf("watermill %s schema: %w", cmp.Or(wm.schema, "default"), err)
	}
	e.wmTopic = topic
	return table, nil
}

// drainWatermill runs the forwarder process until the stream holds every
// event, then checks that what arrived is the events themselves, unwrapped
// from their envelopes.
func drainWatermill(ctx context.Context, e *benchEnv, o drainOpts, wm wmOpts) (drainResult, error) {
	self, err := os.Executable()
	if err != nil {
		return drainResult{}, err
	}
	c, err := startChild("watermill forwarder", self, e.wmForwarderArgs(wm)...)
	if err != nil {
		return drainResult{}, err
	}
	res, err := drainChildren(ctx, e, o, []*child{c})
	if err == nil {
		err = e.checkForwarded(ctx, o.events)
	}
	return res, err
}

// wmForwarderArgs are the `bench watermill-forwarder` arguments that run
// the forwarder with wm's settings on this env's topic and stream.
func (e *benchEnv) wmForwarderArgs(wm wmOpts) []string {
	args := []string{"watermill-forwarder", "--db", e.pg, "--broker", e.natsU, "--topic", e.wmTopic, "--batch", strconv.Itoa(wm.batch),
		"--poll", wm.poll.String(), "--driver", cmp.Or(wm.driver, "pgx"), "--schema", cmp.Or(wm.schema, "default")}
	if wm.cpuProfile != "" {
		args = append(args, "--cpuprofile", wm.cpuProfile, "--publish-time")
	}
	return args
}

// checkForwarded reads the first and last message of the stream: each must
// carry an event's JSON payload, its metadata as headers and a message id.
func (e *benchEnv) checkForwarded(ctx context.Context, events int) error {
	s, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		return err
	}
	for _, seq := range []uint64{1, uint64(events)} {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return fmt.Errorf("stream message %d: %w", seq, err)
		}
		var p benchPayload
		if err := json.Unmarshal(m.Data, &p); err != nil || p.Note != note240 {
			return fmt.Errorf("stream message %d is not a forwarded event: %q (%v)", seq, m.Data, err)
		}
		if m.Subject != e.wmDestination() || m.Header.Get("aggregate_id") == "" || m.Header.Get("Nats-Msg-Id") == "" {
			return fmt.Errorf("stream message %d: subject %q, headers %v", seq, m.Subject, m.Header)
		}
	}
	return nil
}

// watermillForwarderCmd is the child process: Watermill's forwarder at the
// best settings its components offer for a drain. The SQL subscriber reads
// SubscribeBatchSize rows per query in one REPEATABLE READ transaction,
// hands them to the router one at a time (each acked before the next) and
// stores the offset once per batch; PollInterval is only waited after a
// query found nothing. The NATS publisher waits for each PubAck
// (js.PublishMsg) and sets Nats-Msg-Id to the message UUID (TrackMsgId), so
// JetStream deduplicates republished copies. One forwarder per consumer
// group: the offsets row is locked FOR UPDATE, so a second one would only
// wait.
func watermillForwarderCmd(args []string) error {
	fs := newFlags("watermill-forwarder")
	db, broker := fs.services()
	topic := fs.String("topic", "", "watermill-sql topic the forwarder reads")
	batch := fs.Int("batch", 1000, "SubscribeBatchSize")
	poll := fs.Duration("poll", 10*time.Millisecond, "PollInterval")
	driver := fs.String("driver", "pgx", "pgx or stdlib")
	schemaName := fs.String("schema", "default", "default, or queue (PostgreSQLQueueSchema + DeleteOnAck)")
	publishTime := fs.Bool("publish-time", false, "at exit, print the time spent inside the NATS publisher's Publish against the time from first to last message")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (written when the forwarder stops)")
	fs.parse(args)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return err
		}
		// Deferred first, so it runs last: after the forwarder, its
		// publisher and its pool have closed.
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	schema, offsets, group := wmAdapters(*schemaName, *batch)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := wmLogger{}
	var beginner wmsql.Beginner
	switch *driver {
	case "pgx":
		pool, err := pgxpool.New(ctx, *db)
		if err != nil {
			return err
		}
		defer pool.Close()
		beginner = wmsql.BeginnerFromPgx(pool)
	case "stdlib":
		sdb, err := sql.Open("pgx", *db)
		if err != nil {
			return err
		}
		defer sdb.Close()
		beginner = wmsql.BeginnerFromStdSQL(sdb)
	default:
		return fmt.Errorf("--driver %q: want pgx or stdlib", *driver)
	}
	sub, err := wmsql.NewSubscriber(beginner, wmsql.SubscriberConfig{
		ConsumerGroup:  group,
		PollInterval:   *poll,
		ResendInterval: *poll,
		SchemaAdapter:  schema,
		OffsetsAdapter: offsets,
	}, logger)
	if err != nil {
		return err
	}
	pub, err := wmnats.NewPublisher(wmnats.PublisherConfig{
		URL:       *broker,
		Marshaler: &wmnats.NATSMarshaler{},
		JetStream: wmnats.JetStreamConfig{TrackMsgId: true},
	}, logger)
	if err != nil {
		return err
	}
	defer pub.Close()
	var fwdPub message.Publisher = pub
	if *publishTime {
		tp := &timedPublisher{Publisher: pub}
		defer tp.report()
		fwdPub = tp
	}
	fwd, err := forwarder.NewForwarder(sub, fwdPub, logger, forwarder.Config{ForwarderTopic: *topic, CloseTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		wmClosing.Store(true)
		_ = fwd.Close()
	}()
	return fwd.Run(context.Background())
}

// wmLogger prints Watermill's errors and drops the rest, so a forwarder
// that cannot decode or publish says why. Errors from the interrupted
// transaction at shutdown are dropped too.
type wmLogger struct{ fields watermill.LogFields }

var wmClosing atomic.Bool

func (l wmLogger) Error(msg string, err error, fields watermill.LogFields) {
	if wmClosing.Load() {
		return
	}
	var b strings.Builder
	for k, v := range l.fields.Add(fields) {
		if k == "payload" {
			continue
		}
		fmt.Fprintf(&b, " %s=%v", k, v)
	}
	fmt.Fprintf(os.Stderr, "watermill: %s: %v%s\n", msg, err, b.String())
}
func (wmLogger) Info(string, watermill.LogFields)  {}
func (wmLogger) Debug(string, watermill.LogFields) {}
func (wmLogger) Trace(string, watermill.LogFields) {}
func (l wmLogger) With(f watermill.LogFields) watermill.LoggerAdapter {
	return wmLogger{fields: l.fields.Add(f)}
}
