// Package cdc is the change data capture relay for PostgreSQL: instead of
// polling the outbox table it reads the database's log through logical
// replication (the built-in pgoutput plugin, jackc/pglogrepl), so events
// reach the broker in commit order with no query load on the outbox.
//
// It reads rows inserted into the outbox table (a publication, created by
// `txbox migrate --cdc`) and tableless events (logical decoding messages
// written by outbox.WithCDCMessages), and publishes both through the same
// relay code as the polling loop (relay.DeliverOrdered), so messages are
// identical on the wire. A run of the stream is recorded (delivered rows
// archived or deleted, dead ones stored with last_error) and only then is
// its log position confirmed to the slot: a relay killed in between reads
// the same events again from the slot and republishes them with the same
// ids, which the broker's dedupe and the consumers' inbox absorb.
//
// One slot has one reader: PostgreSQL refuses a second START_REPLICATION
// on an active slot, and a second relay keeps retrying (a standby) until
// the first one's connection is gone.
package cdc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/relay"
	"github.com/txbox/txbox/store/postgres"
	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// Defaults of Config.
const (
	DefaultBatchSize      = 1000
	DefaultStatusInterval = time.Second
	DefaultStandbyRetry   = 2 * time.Second
	DefaultLagWarnBytes   = 1 << 30
)

// Config configures a CDC relay.
type Config struct {
	// Store is the outbox's PostgreSQL store: the bookkeeping (archive,
	// dead rows, the slot registry) goes through its pool. Required.
	Store *postgres.Store
	// ConnString is the database URL; "replication=database" is added for
	// the replication connection. Required.
	ConnString string
	// Slot names the replication slot (lower-case letters, digits, _; at
	// most 63). It is created on first use. Required.
	Slot string
	// Relay configures the publishing: Publisher, Topic, Source, backoff,
	// MaxAttempts, Logger, Metrics, Tracer. Its Store is set to Store.
	// Metrics from prom.NewRelayMetrics (telemetry/prom) also get the
	// slots' lag gauges.
	Relay relay.Config
	// BatchSize is the most events published and recorded in one step; the
	// position is confirmed after each step. Default DefaultBatchSize.
	BatchSize int
	// StatusInterval is how often the confirmed position is reported to
	// PostgreSQL. Default DefaultStatusInterval.
	StatusInterval time.Duration
	// StandbyRetry is how often a relay whose slot is active elsewhere (or
	// whose connection failed) tries again. Default DefaultStandbyRetry.
	StandbyRetry time.Duration
	// LagWarnBytes logs a warning while a registered slot holds more log
	// than this. Default DefaultLagWarnBytes; negative: never.
	LagWarnBytes int64
}

var slotRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// ValidateSlot checks a slot name the way PostgreSQL will.
func ValidateSlot(slot string) error {
	if !slotRE.MatchString(slot) {
		return &txbox.ConfigError{Field: "--slot (TXBOX_SLOT)", Reason: fmt.Sprintf("%q: want 1 to 63 lower-case letters, digits or _", slot)}
	}
	return nil
}

// Reader is a CDC relay: it reads the outbox changes from a replication
// slot and publishes them through a relay.Relay. Create it with New and run
// it with Run.
type Reader struct {
	cfg Config
	rel *relay.Relay
	log *slog.Logger
	lag *lagCollector
	// registered is when the slot's position was last written to the
	// registry (the delivery goroutine's).
	registered time.Time
	reading    atomic.Bool
	// backfilled is how far the slot's backfill went (set before
	// streaming starts).
	backfilled cdcstore.Backfill
	db         cdcstore.Store // the store's CDC side
	beatAt     atomic.Int64   // unix ns: the loop went round
}

// New validates cfg.
func New(cfg Config) (*Reader, error) {
	switch {
	case cfg.Store == nil:
		return nil, &txbox.ConfigError{Field: "Store", Reason: "required"}
	case cfg.ConnString == "":
		return nil, &txbox.ConfigError{Field: "ConnString", Reason: "required"}
	}
	if err := ValidateSlot(cfg.Slot); err != nil {
		return nil, err
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultBatchSize)
	cfg.StatusInterval = cmp.Or(cfg.StatusInterval, DefaultStatusInterval)
	cfg.StandbyRetry = cmp.Or(cfg.StandbyRetry, DefaultStandbyRetry)
	cfg.LagWarnBytes = cmp.Or(cfg.LagWarnBytes, DefaultLagWarnBytes)
	if cfg.BatchSize < 1 || cfg.BatchSize > 100000 {
		return nil, &txbox.ConfigError{Field: "BatchSize", Reason: fmt.Sprintf("%d is outside 1..100000", cfg.BatchSize)}
	}
	cfg.Relay.Logger = cmp.Or(cfg.Relay.Logger, slog.Default())
	cfg.Relay.ID = cmp.Or(cfg.Relay.ID, "cdc-"+cfg.Slot)
	cfg.Relay.Store = cfg.Store
	rel, err := relay.New(cfg.Relay)
	if err != nil {
		return nil, err
	}
	r := &Reader{cfg: cfg, rel: rel, db: cdcstore.For(cfg.Store), log: cfg.Relay.Logger.With("slot", cfg.Slot)}
	r.beat()
	r.lag = newLagCollector(r.db)
	// The slots' lag goes where the relay's Prometheus metrics go.
	if pm, ok := cfg.Relay.Metrics.(interface{ Registerer() prometheus.Registerer }); ok {
		if err := pm.Registerer().Register(r.lag); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return r, nil
}

// Relay returns the publishing relay, for its health and counters.
func (r *Reader) Relay() *relay.Relay { return r.rel }

// Run reads the slot and publishes until ctx ends; then it finishes the
// step in flight, confirms it, and returns nil. A lost connection, a
// failed step or a slot that another relay reads makes it wait
// StandbyRetry and start again from the slot's confirmed position.
func (r *Reader) Run(ctx context.Context) error {
	if err := r.db.CheckCDC(ctx); err != nil {
		return err
	}
	r.log.Info("cdc relay started", "publication", r.db.Publication(), "batch", r.cfg.BatchSize)
	go r.watchLag(ctx)
	go r.rel.Observe(ctx)
	standby := false
	// failing: a session ended in an error and the ones after it failed at
	// once. A database away for an hour then logs this line once (the
	// relay's backlog samples log when the database goes and comes back),
	// not once per retry.
	failing := false
	for ctx.Err() == nil {
		r.beat()
		began := time.Now()
		err := r.session(ctx)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errSlotActive):
			if !standby {
				r.log.Info("slot is active: another relay reads it; waiting as standby", "retry", r.cfg.StandbyRetry)
			}
			standby, failing = true, false
		case err != nil && failing && time.Since(began) < time.Second:
			r.log.Debug("cdc session failed again", "err", err)
		case err != nil:
			standby, failing = false, true
			r.log.Warn("cdc session ended; reading again from the slot's confirmed position", "err", err, "retry_in", r.cfg.StandbyRetry)
		default:
			failing = false
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.StandbyRetry):
		}
	}
	r.log.Info("cdc relay stopped")
	return nil
}
