package console

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
)

// sample is one look at the counts; the overview's chart is the last
// hour of them. Throughput is the growth of the SENT count between two
// samples (the archive's size), so it reads 0 with --delete-sent and dips
// to 0 while cleanup trims the archive.
type sample struct {
	At      time.Time `json:"at"`
	Backlog int64     `json:"backlog"`
	Sent    int64     `json:"sent"`
	Dead    int64     `json:"dead"`
}

const sampleSpan = time.Hour

func (c *Console) takeSample(ctx context.Context) (store.Stats, error) {
	st, err := c.s.Stats(ctx)
	if err != nil {
		return st, err
	}
	now := time.Now()
	s := sample{At: now, Sent: st.Counts[txbox.StatusSent], Dead: st.Dead,
		Backlog: st.Counts[txbox.StatusPending] + st.Counts[txbox.StatusRetry] + st.Counts[txbox.StatusProcessing]}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, s)
	i := 0
	for i < len(c.samples) && now.Sub(c.samples[i].At) > sampleSpan {
		i++
	}
	c.samples = c.samples[i:]
	return st, nil
}

// freshSample reads the stats for a page and keeps them as a sample when
// the last one is older than half the sampling interval, so the chart
// fills in even where nobody called Run.
func (c *Console) freshSample(ctx context.Context) (store.Stats, error) {
	c.mu.Lock()
	stale := len(c.samples) == 0 || time.Since(c.samples[len(c.samples)-1].At) > c.o.SampleEvery/2
	c.mu.Unlock()
	if stale {
		return c.takeSample(ctx)
	}
	return c.s.Stats(ctx)
}

func (c *Console) sampleList() []sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sample(nil), c.samples...)
}

// chart is the overview's inline SVG: backlog and delivered per second
// over the last hour, as polyline points. Only numbers go into it.
type chart struct {
	W, H          int
	Backlog, Rate string // "x,y x,y ..."
	MaxBacklog    int64
	MaxRate       float64
	Span          string
	Points        int
}

func makeChart(ss []sample) chart {
	ch := chart{W: 600, H: 120, Points: len(ss)}
	if len(ss) == 0 {
		return ch
	}
	// The x axis spans the samples there are (at most the last hour), so
	// a console started a minute ago does not draw a sliver.
	t0 := ss[0].At
	span := ss[len(ss)-1].At.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	x := func(t time.Time) float64 { return float64(ch.W) * t.Sub(t0).Seconds() / span }
	rates := make([]float64, len(ss))
	for i, s := range ss {
		ch.MaxBacklog = max(ch.MaxBacklog, s.Backlog)
		if i > 0 {
			if dt := s.At.Sub(ss[i-1].At).Seconds(); dt > 0 && s.Sent > ss[i-1].Sent {
				rates[i] = float64(s.Sent-ss[i-1].Sent) / dt
			}
		}
		ch.MaxRate = max(ch.MaxRate, rates[i])
	}
	y := func(v, top float64) float64 {
		if top <= 0 {
			return float64(ch.H)
		}
		return float64(ch.H) - float64(ch.H-4)*v/top
	}
	var b, r strings.Builder
	for i, s := range ss {
		fmt.Fprintf(&b, "%.1f,%.1f ", x(s.At), y(float64(s.Backlog), float64(ch.MaxBacklog)))
		fmt.Fprintf(&r, "%.1f,%.1f ", x(s.At), y(rates[i], ch.MaxRate))
	}
	ch.Backlog, ch.Rate = strings.TrimSpace(b.String()), strings.TrimSpace(r.String())
	ch.Span = ss[len(ss)-1].At.Sub(ss[0].At).Round(time.Second).String()
	return ch
}
