package natsbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/defaults"
	"github.com/txbox/txbox/broker/internal/halt"
)

// Header names on the wire.
const (
	// headerPrefix starts every CloudEvents attribute header, per the
	// CloudEvents NATS binding.
	headerPrefix = "ce-"
	// headerContentType carries datacontenttype too: the binding maps it
	// to the NATS "content-type" header in binary mode.
	headerContentType = "content-type"
)

// Options configure a Publisher. The zero value publishes to the stream
// "TXBOX", which must exist.
type Options struct {
	// Stream the publisher checks at Open and reports limits from. Default:
	// the stream that captures Topic when Topic is set, else "TXBOX".
	// Messages go wherever their subject routes them.
	Stream string
	// Topic, when set, is a subject this publisher will publish to (a
	// rendering of the relay's topic template). With Stream empty, the
	// stream is the one whose subjects capture it (with CreateStream and no
	// such stream, "TXBOX" is created); a stream that does not capture it
	// is refused at Open, instead of every event failing with "no stream".
	Topic string
	// Subjects the stream must hold when CreateStream is set. Default
	// ["outbox.>"], matching the default topic template.
	Subjects []string
	// CreateStream creates the stream when it is missing (file storage,
	// DuplicateWindow, Replicas) and adds missing Subjects to an existing
	// one, leaving the rest of its configuration alone.
	CreateStream bool
	// DuplicateWindow of a created stream: how long JetStream remembers an
	// event id to drop a republish. 0 keeps the server default (2 minutes).
	DuplicateWindow time.Duration
	// Replicas of a created stream. 0 means 1.
	Replicas int
	// MaxInFlight bounds the messages sent but not yet acknowledged, over
	// all concurrent Publish calls. Default 4096.
	MaxInFlight int
	// AckTimeout bounds the wait for one PubAck even when the caller's
	// context has no deadline. Default 30s.
	AckTimeout time.Duration
	// NoBatchPublish never uses atomic batches, even where the server and
	// stream allow them: every message is its own publish, and the relay
	// keeps one unconfirmed message per key (see PipelinesPerKey).
	NoBatchPublish bool
	// Connection is how to reach the server, the same as in SubscriberOptions.
	Connection
}

// withDefaults fills the fields left zero and checks the others.
func (o *Options) withDefaults() error {
	if o.Stream == "" && o.Topic == "" {
		o.Stream = DefaultStream
	}
	if o.Stream != "" {
		if err := ValidateStreamName(o.Stream); err != nil {
			return &txbox.ConfigError{Field: "Options.Stream", Reason: err.Error()}
		}
	}
	if len(o.Subjects) == 0 {
		o.Subjects = []string{defaultSubjects}
	}
	o.MaxInFlight = defaults.Positive(o.MaxInFlight, defaultMaxInFlight)
	o.AckTimeout = defaults.Positive(o.AckTimeout, defaultAckTimeout)
	o.Connection.withDefaults("txbox-publisher")
	return nil
}

// Publisher publishes to JetStream. It is safe for concurrent use.
type Publisher struct {
	session
	stream    string
	streamMax int // the stream's max_msg_size, 0 when unlimited
	slots     chan struct{}
	// batches bounds the atomic batches in flight; nil when the publisher
	// does not batch (see PipelinesPerKey).
	batches    chan struct{}
	fast       bool          // batches are fast-ingest ones, else atomic
	fastIn     *fastInbox    // answers to fast batches
	committed  atomic.Uint64 // batches the stream stored whole, for tests
	ackTimeout time.Duration
	log        *slog.Logger
	dups       atomic.Uint64
	closeOnce  sync.Once
}

var _ broker.Publisher = (*Publisher)(nil)

// Open connects to url (a NATS server list, which may carry user:password;
// it is never logged or returned in clear) and checks, or with CreateStream
// makes, the stream. An unreachable server is reported with
// txbox.ErrBrokerUnavailable, a bad URL or a missing stream with a
// *txbox.ConfigError.
func Open(ctx context.Context, url string, opts Options) (*Publisher, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	// Our own window is the real bound; jetstream's equals it so that it
	// never stalls a publish we already admitted.
	sess, err := openSession(ctx, url, opts.Connection,
		jetstream.WithPublishAsyncMaxPending(opts.MaxInFlight), jetstream.WithPublishAsyncTimeout(opts.AckTimeout))
	if err != nil {
		return nil, err
	}
	p := &Publisher{session: sess, stream: opts.Stream, log: opts.Logger, slots: make(chan struct{}, opts.MaxInFlight), ackTimeout: opts.AckTimeout}
	fail := func(err error) (*Publisher, error) {
		sess.close()
		return nil, err
	}
	if opts.Stream == "" {
		if opts.Stream, err = streamFor(ctx, sess.js, opts); err != nil {
			return fail(err)
		}
		p.stream = opts.Stream
	}
	cfg, err := ensureStream(ctx, sess.js, opts)
	if err != nil {
		return fail(err)
	}
	if opts.Topic != "" && !captures(cfg.Subjects, opts.Topic) {
		return fail(&txbox.ConfigError{Field: "Options.Stream", Reason: fmt.Sprintf("stream %q (subjects %s) does not capture subject %q of Options.Topic: every event would fail; "+
			"name the stream that holds it, add the subject to the stream, or set Options.CreateStream", opts.Stream, strings.Join(cfg.Subjects, ", "), opts.Topic)})
	}
	p.streamMax = int(max(cfg.MaxMsgSize, 0))
	switch version := sess.nc.ConnectedServerVersion(); {
	case opts.NoBatchPublish:
	case cfg.AllowBatchPublish && supportsFastBatch(version):
		if p.fastIn, err = startFastInbox(sess.nc); err != nil {
			return fail(txbox.Unavailable(fmt.Errorf("nats: subscribe to fast batch answers: %w", err)))
		}
		p.fast = true
		p.batches = make(chan struct{}, maxBatchesInFlight)
	case cfg.AllowAtomicPublish && supportsAtomicBatch(version):
		p.batches = make(chan struct{}, maxBatchesInFlight)
	case supportsAtomicBatch(version):
		opts.Logger.Info("nats: the stream allows neither fast nor atomic batch publish (allow_batched, allow_atomic): one unconfirmed event per aggregate", "stream", p.stream, "server", version)
	}
	return p, nil
}

// streamFor finds the stream that captures opts.Topic; with CreateStream
// and none, the default stream (created by ensureStream).
func streamFor(ctx context.Context, js jetstream.JetStream, opts Options) (string, error) {
	name, err := js.StreamNameBySubject(ctx, opts.Topic)
	switch {
	case err == nil:
		opts.Logger.Info("nats: using the stream that captures the topic", "stream", name, "subject", opts.Topic)
		return name, nil
	case errors.Is(err, jetstream.ErrStreamNotFound) && opts.CreateStream:
		return DefaultStream, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return "", &txbox.ConfigError{Field: "Options.Stream", Reason: fmt.Sprintf("no stream captures subject %q of Options.Topic: every event would fail; "+
			"create one, or set Options.CreateStream", opts.Topic)}
	}
	return "", streamErr("look up the stream of subject", opts.Topic, err)
}

// ensureStream finds the stream, or creates or extends it with CreateStream.
func ensureStream(ctx context.Context, js jetstream.JetStream, opts Options) (jetstream.StreamConfig, error) {
	s, err := js.Stream(ctx, opts.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && !opts.CreateStream:
		return jetstream.StreamConfig{}, &txbox.ConfigError{Field: "Options.Stream", Reason: fmt.Sprintf("stream %q does not exist: create it, or set Options.CreateStream", opts.Stream)}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		cfg := jetstream.StreamConfig{
			Name:       opts.Stream,
			Subjects:   opts.Subjects,
			Storage:    jetstream.FileStorage,
			Duplicates: opts.DuplicateWindow,
			Replicas:   max(opts.Replicas, 1),
			// A server that has batch publish gets a stream that allows
			// it, so that the publisher can pipeline one key's events.
			AllowAtomicPublish: !opts.NoBatchPublish && supportsAtomicBatch(js.Conn().ConnectedServerVersion()),
			AllowBatchPublish:  !opts.NoBatchPublish && supportsFastBatch(js.Conn().ConnectedServerVersion()),
		}
		s, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, opts.Stream) // another relay made it first
		}
		if err != nil {
			return jetstream.StreamConfig{}, streamErr("create", opts.Stream, err)
		}
		opts.Logger.Info("nats: created stream", "stream", opts.Stream, "subjects", opts.Subjects)
		return s.CachedInfo().Config, nil
	case err != nil:
		return jetstream.StreamConfig{}, streamErr("look up", opts.Stream, err)
	}
	cfg := s.CachedInfo().Config
	if !opts.CreateStream {
		return cfg, nil
	}
	var missing []string
	for _, subj := range opts.Subjects {
		if !slices.Contains(cfg.Subjects, subj) {
			missing = append(missing, subj)
		}
	}
	if len(missing) == 0 {
		return cfg, nil
	}
	cfg.Subjects = append(cfg.Subjects, missing...)
	if s, err = js.UpdateStream(ctx, cfg); err != nil {
		return jetstream.StreamConfig{}, streamErr("add subjects to", opts.Stream, err)
	}
	opts.Logger.Info("nats: added subjects to stream", "stream", opts.Stream, "subjects", missing)
	return s.CachedInfo().Config, nil
}

// streamErr tells a refused configuration from an unreachable server.
func streamErr(verb, stream string, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		return &txbox.ConfigError{Field: "Options.Stream", Reason: fmt.Sprintf("%s stream %q: %v", verb, stream, err)}
	}
	return txbox.Unavailable(fmt.Errorf("nats: %s stream %q: %w", verb, stream, err))
}

// MaxPayload is the largest message, headers and body together, the
// publisher sends: the server's limit, or the stream's if smaller. A larger
// one fails with txbox.ErrPermanent.
func (p *Publisher) MaxPayload() int {
	limit := int(p.nc.MaxPayload())
	if p.streamMax > 0 && (limit <= 0 || p.streamMax < limit) {
		limit = p.streamMax
	}
	return limit
}

// Duplicates counts messages JetStream acknowledged as duplicates of an
// event id it already stored: republishes the dedupe absorbed. A fast
// batch's PubAck does not say which of its messages were duplicates, so
// those are not counted.
func (p *Publisher) Duplicates() uint64 { return p.dups.Load() }

// Publish sends every message in slice order without waiting between them,
// at most MaxInFlight unacknowledged at a time, then waits for each PubAck.
// With PipelinesPerKey, the messages of a key that has several in the call
// go as atomic batches instead (see publishRun).
//
// A message that cannot be sent as it is (bad subject, bad header value,
// over the size limit) fails with txbox.ErrPermanent and the others go on.
// One the stream cannot take for a state of its own (no stream captures
// its subject, the stream is full or sealed, JetStream has no leader) fails
// with txbox.ErrBrokerUnavailable, and the others go on too. Once the
// connection fails, the rest of the call is not sent and fails with
// txbox.ErrBrokerUnavailable, so a later message of a key is not handed
// over while an earlier one is lost in a broken connection.
func (p *Publisher) Publish(ctx context.Context, msgs []broker.Message) []error {
	if p.batches != nil {
		return p.publishBatched(ctx, msgs)
	}
	return p.publishEach(ctx, msgs)
}

// publishEach publishes every message on its own, pipelined.
func (p *Publisher) publishEach(ctx context.Context, msgs []broker.Message) []error {
	errs := make([]error, len(msgs))
	type sent struct {
		i    int
		f    jetstream.PubAckFuture
		size int
	}
	var window []sent
	lookups := map[string]error{}
	call := halt.New("nats")

	// await fills in the result of the oldest message in flight and frees
	// its slot; after ctx ends a helper frees the slot once jetstream
	// settles the future (ack, disconnect or AckTimeout), so the window
	// never admits more than jetstream will take.
	await := func() {
		s := window[0]
		window = window[1:]
		settled := func(ack *jetstream.PubAck, err error) {
			if err != nil {
				errs[s.i] = p.classify(ctx, s.f.Msg().Subject, s.size, err, lookups)
			} else if ack.Duplicate {
				p.dups.Add(1)
			}
			<-p.slots
		}
		// A settled future wins over an ended ctx: a confirmed message
		// must not be reported as failed.
		select {
		case ack := <-s.f.Ok():
			settled(ack, nil)
			return
		case err := <-s.f.Err():
			settled(nil, err)
			return
		default:
		}
		select {
		case ack := <-s.f.Ok():
			settled(ack, nil)
		case err := <-s.f.Err():
			settled(nil, err)
		case <-ctx.Done():
			errs[s.i] = txbox.Unavailable(fmt.Errorf("nats: waiting for the ack of event %s: %w", msgs[s.i].Event.ID, ctx.Err()))
			go func() {
				select {
				case <-s.f.Ok():
				case <-s.f.Err():
				}
				<-p.slots
			}()
		}
	}

	for i, m := range msgs {
		if call.Skip(ctx, errs, i) {
			continue
		}
		nm, size, err := p.encode(m)
		if err != nil {
			errs[i] = err
			continue
		}
		if !p.acquire(ctx, func() bool {
			if len(window) == 0 {
				return false
			}
			await()
			return true
		}) {
			errs[i] = call.Break(txbox.Unavailable(fmt.Errorf("nats: waiting for a free publish slot: %w", ctx.Err())))
			continue
		}
		if st := p.nc.Status(); st != nats.CONNECTED {
			<-p.slots
			errs[i] = call.Break(txbox.Unavailable(fmt.Errorf("nats: publish: %w", fmt.Errorf("connection is %s", st))))
			continue
		}
		f, err := p.js.PublishMsgAsync(nm, jetstream.WithRetryAttempts(0))
		if err != nil {
			<-p.slots
			errs[i] = p.classify(ctx, nm.Subject, size, err, lookups)
			if errors.Is(errs[i], txbox.ErrBrokerUnavailable) {
				call.Break(errs[i])
			}
			continue
		}
		window = append(window, sent{i: i, f: f, size: size})
	}
	for len(window) > 0 {
		await()
	}
	return errs
}

// acquire takes a slot of the shared window. While none is free it settles
// this call's own oldest message (drain) rather than wait on others, so
// concurrent calls cannot starve each other into a deadlock.
func (p *Publisher) acquire(ctx context.Context, drain func() bool) bool {
	for {
		select {
		case p.slots <- struct{}{}:
			return true
		default:
		}
		if drain() {
			continue
		}
		select {
		case p.slots <- struct{}{}:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// encode builds the NATS message for m, or says why it can never be sent.
func (p *Publisher) encode(m broker.Message) (*nats.Msg, int, error) {
	if err := ValidateSubject(m.Topic); err != nil {
		return nil, 0, txbox.Permanent(fmt.Errorf("nats: event %s: %w", m.Event.ID, err))
	}
	attrs, err := broker.Attributes(m)
	if err != nil {
		return nil, 0, err
	}
	h := make(nats.Header, len(attrs)+2)
	// Header keys are set directly: nats.go keeps their case, and the SDK
	// looks "ce-specversion" up case-sensitively.
	for _, a := range attrs {
		if err := checkHeaderValue(a[1]); err != nil {
			return nil, 0, txbox.Permanent(fmt.Errorf("%w: nats: event %s: attribute %s: %v", txbox.ErrInvalidEvent, m.Event.ID, a[0], err))
		}
		h[headerPrefix+a[0]] = []string{a[1]}
	}
	h[headerContentType] = []string{broker.ContentJSON}
	h[jetstream.MsgIDHeader] = []string{m.Event.ID}

	size := headerSize(h) + len(m.Event.Payload)
	if limit := p.nc.MaxPayload(); limit > 0 && int64(size) > limit {
		return nil, size, txbox.Permanent(fmt.Errorf("nats: event %s for %q is %d bytes (payload %d + headers %d), over the server's max_payload of %d",
			m.Event.ID, m.Topic, size, len(m.Event.Payload), size-len(m.Event.Payload), limit))
	}
	return &nats.Msg{Subject: m.Topic, Header: h, Data: m.Event.Payload}, size, nil
}

// checkHeaderValue refuses what nats.go would silently change: it trims
// surrounding whitespace and turns CR and LF into spaces.
func checkHeaderValue(v string) error {
	if strings.ContainsAny(v, "\r\n") {
		return fmt.Errorf("value %q has a line break, which NATS headers cannot carry", v)
	}
	if textproto.TrimString(v) != v {
		return fmt.Errorf("value %q has leading or trailing whitespace, which NATS headers drop", v)
	}
	return nil
}

// headerSize is the encoded size of h as nats.go writes it, which counts
// against max_payload.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// JetStream error codes of a refused publish that the jetstream package
// does not name (nats-server's jetstream_errors_generated.go).
const (
	jsErrClusterNoPeers          jetstream.ErrorCode = 10005
	jsErrClusterNotAvailable     jetstream.ErrorCode = 10008
	jsErrClusterNotLeader        jetstream.ErrorCode = 10009
	jsErrInsufficientResources   jetstream.ErrorCode = 10023
	jsErrStreamStoreFailed       jetstream.ErrorCode = 10077
	jsErrStreamHeaderExceedsMax  jetstream.ErrorCode = 10097
	jsErrStreamSealed            jetstream.ErrorCode = 10109
	jsErrStreamOffline           jetstream.ErrorCode = 10118
	jsErrDuplicateMessageInFlux  jetstream.ErrorCode = 10158
	jsErrStreamTooManyRequests   jetstream.ErrorCode = 10167
	jsErrStreamOfflineWithReason jetstream.ErrorCode = 10194
)

// classify maps a publish failure to txbox's classes: what the event
// itself makes impossible (its size, its subject, its headers) is
// permanent; what the stream or the server refuses for a state of its own
// (no stream for the subject, full, sealed, offline, no leader) is an
// outage, which spends none of the event's attempts, since a stream
// deleted or full for an hour would otherwise send every event to DEAD.
// lookups caches, per call, the stream lookup that names the cause of an
// unanswered publish.
func (p *Publisher) classify(ctx context.Context, subject string, size int, err error, lookups map[string]error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return txbox.Permanent(fmt.Errorf("nats: message for %q is %d bytes, over the server's max_payload of %d: %w", subject, size, p.nc.MaxPayload(), err))
	case errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrBadHeaderMsg), errors.Is(err, nats.ErrInvalidMsg):
		return txbox.Permanent(fmt.Errorf("nats: cannot publish to %q: %w", subject, err))
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		if res, ok := lookups[subject]; ok {
			return res
		}
		res := p.noStream(ctx, subject, err)
		lookups[subject] = res
		return res
	case errors.As(err, &apiErr):
		switch code := apiErr.ErrorCode; {
		case code == jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return txbox.Permanent(fmt.Errorf("nats: message for %q is %d bytes, over the stream's max_msg_size: %w", subject, size, err))
		case code == jsErrStreamHeaderExceedsMax:
			return txbox.Permanent(fmt.Errorf("nats: headers of the message for %q are over the stream's limit: %w", subject, err))
		case code == jsErrStreamStoreFailed && strings.Contains(apiErr.Description, "message too large"):
			return txbox.Permanent(fmt.Errorf("nats: message for %q is %d bytes, too large for the stream's store: %w", subject, size, err))
		case code == jetstream.JSErrCodeStreamNotFound:
			return txbox.Unavailable(fmt.Errorf("nats: no JetStream stream captures subject %q (stream deleted or not yet created?): %w", subject, err))
		case code == jsErrStreamStoreFailed:
			// Discard-new limits (maximum messages, bytes, messages per
			// subject) and a closed store.
			return txbox.Unavailable(fmt.Errorf("nats: the stream for %q is full or cannot store (limits with discard new?): %w", subject, err))
		case code == jsErrInsufficientResources:
			return txbox.Unavailable(fmt.Errorf("nats: the server has no room for the message for %q (JetStream storage or memory limit): %w", subject, err))
		case code == jsErrStreamSealed:
			return txbox.Unavailable(fmt.Errorf("nats: the stream for %q is sealed and takes no messages: %w", subject, err))
		case code == jetstream.JSErrCodeJetStreamNotEnabled, code == jetstream.JSErrCodeJetStreamNotEnabledForAccount,
			code == jsErrClusterNoPeers, code == jsErrClusterNotAvailable, code == jsErrClusterNotLeader,
			code == jsErrStreamOffline, code == jsErrStreamOfflineWithReason,
			code == jsErrDuplicateMessageInFlux, code == jsErrStreamTooManyRequests:
			return txbox.Unavailable(fmt.Errorf("nats: JetStream cannot take the message for %q now: %w", subject, err))
		}
		// A refusal not known here (an expectation header, a message
		// TTL): the relay's retries and attempt limit decide.
		return fmt.Errorf("nats: stream refused message for %q: %w", subject, err)
	default:
		return txbox.Unavailable(fmt.Errorf("nats: publish to %q: %w", subject, err))
	}
}

// noStream says what "nobody answered" means, which is an outage in every
// case: no stream holds the subject (deleted, or not created yet), a
// stream holds it but did not answer (JetStream still recovering after a
// restart, a leader election), or the lookup that tells them apart failed.
func (p *Publisher) noStream(ctx context.Context, subject string, cause error) error {
	if ctx.Err() != nil {
		return txbox.Unavailable(fmt.Errorf("nats: no answer for %q: %w", subject, cause))
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	name, err := p.js.StreamNameBySubject(lctx, subject)
	switch {
	case err == nil:
		return txbox.Unavailable(fmt.Errorf("nats: stream %q holds subject %q but did not answer: %w", name, subject, cause))
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return txbox.Unavailable(fmt.Errorf("nats: no JetStream stream captures subject %q (stream deleted or not yet created?): %w", subject, cause))
	default:
		return txbox.Unavailable(fmt.Errorf("nats: no answer for %q, and the stream lookup failed (%v): %w", subject, err, cause))
	}
}

// Close closes the connection Open dialled; a Conn passed in Options stays
// open.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.fastIn.close()
		p.session.close()
	})
	return nil
}

// Conn is the underlying connection, for health checks.
func (p *Publisher) Conn() *nats.Conn { return p.nc }
