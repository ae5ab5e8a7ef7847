package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/txbox/txbox/store"
)

// horizonWatch follows the store's horizon samples (store.HorizonSampler)
// for Stats and the log: a warning when a transaction has been open for
// longer than Config.LongTransactionWarn, once, and a line when it ends.
// It is guarded by the observer's mu.
type horizonWatch struct {
	sampler store.HorizonSampler // nil: the store cannot tell
	last    store.Horizon
	warned  bool // the warning is out and the transaction not over
	failed  bool // a sample failed: said once, at info
}

// sampleHorizon takes the horizon sample of one watch round, after the
// backlog's: readiness does not depend on it, so Ready (each /readyz probe)
// does not take one, and a slow one does not age the stall clock.
func (o *observer) sampleHorizon(ctx context.Context) {
	o.mu.Lock()
	down := o.sampleErr != nil // the database's outage is said elsewhere
	o.mu.Unlock()
	if o.hz.sampler == nil || down {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, max(o.r.cfg.MetricsInterval, time.Second))
	h, err := o.hz.sampler.Horizon(hctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return // shutting down
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hz.note(o.r.log, o.r.cfg.LongTransactionWarn, h, err)
}

func (w *horizonWatch) note(log *slog.Logger, warn time.Duration, h store.Horizon, err error) {
	if err != nil {
		if !w.failed {
			log.Info("cannot sample what holds back the cleanup of dead rows; the oldest-transaction gauges stay 0", "err", err)
		}
		w.failed = true
		return
	}
	w.last = h
	switch long := warn > 0 && h.OldestTransaction > warn; {
	case long && !w.warned:
		log.Warn("a transaction of the database has been open for long: it holds back the cleanup of the dead rows the outbox leaves, and claims slow down as they pile up",
			"open_for", h.OldestTransaction.Round(time.Second), "holder", h.Holder, "dead_rows", h.DeadRows, "warn_after", warn)
		w.warned = true
	case !long && w.warned:
		log.Info("the long transaction ended", "dead_rows", h.DeadRows)
		w.warned = false
	}
}
