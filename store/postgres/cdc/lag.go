package cdc

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txbox/txbox/store/postgres/internal/cdcstore"
)

// lagCollector exports the lag of every registered slot, not only this
// relay's: a slot whose relay is gone holds log until it is dropped, and
// the relays still running are the ones whose metrics are scraped.
type lagCollector struct {
	s              cdcstore.Store
	bytes, seconds *prometheus.Desc
	active         *prometheus.Desc
	mu             sync.Mutex
	lags           []SlotLag
}

func newLagCollector(s cdcstore.Store) *lagCollector {
	return &lagCollector{
		s: s,
		bytes: prometheus.NewDesc("txbox_cdc_slot_lag_bytes",
			"Log held by a txbox replication slot that its reader has not confirmed (pg_current_wal_lsn - confirmed_flush_lsn), sampled from the database.", []string{"slot"}, nil),
		seconds: prometheus.NewDesc("txbox_cdc_slot_lag_seconds",
			"Seconds since a txbox slot's reader last confirmed a position, while the slot holds log (0 when caught up), sampled from the database.", []string{"slot"}, nil),
		active: prometheus.NewDesc("txbox_cdc_slot_active",
			"1 while a relay reads the txbox slot, 0 while none does.", []string{"slot"}, nil),
	}
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.bytes
	ch <- c.seconds
	ch <- c.active
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lags {
		active := 0.0
		if l.Active {
			active = 1
		}
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(l.Bytes), l.Slot)
		ch <- prometheus.MustNewConstMetric(c.seconds, prometheus.GaugeValue, l.Seconds, l.Slot)
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, active, l.Slot)
	}
}

// sample reads the lags once and returns them.
func (c *lagCollector) sample(ctx context.Context) ([]SlotLag, error) {
	lags, err := slotLags(ctx, c.s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.lags = lags
	c.mu.Unlock()
	return lags, nil
}

// watchLag samples the slots' lag every MetricsInterval (default 5 s) and
// warns, at most once a minute per slot, while one holds more than
// LagWarnBytes.
func (r *Reader) watchLag(ctx context.Context) {
	every := r.cfg.Relay.MetricsInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	warned := map[string]time.Time{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		lags, err := r.lag.sample(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Debug("slot lag sample failed", "err", err)
		}
		for _, l := range lags {
			if r.cfg.LagWarnBytes > 0 && l.Bytes > r.cfg.LagWarnBytes && time.Since(warned[l.Slot]) > time.Minute {
				warned[l.Slot] = time.Now()
				r.log.Warn("replication slot holds log above the threshold: a slot nobody reads keeps WAL until it is dropped (txbox cdc drop-slot) or max_slot_wal_keep_size invalidates it",
					"lag_slot", l.Slot, "lag_bytes", l.Bytes, "lag_seconds", l.Seconds, "active", l.Active, "threshold", r.cfg.LagWarnBytes)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
