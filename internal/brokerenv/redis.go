package brokerenv

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txbox/txbox/broker"
	redisbroker "github.com/txbox/txbox/broker/redis"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// Redis runs each scenario on a redis-server process of its own, with an
// append-only file (appendfsync always), so the broker-down scenario can
// kill and restart it without losing what it acknowledged. Without the
// binary it uses the shared server (TXBOX_TEST_REDIS) and cannot stop it.
//
// The topic is "<prefix>:{aggregate_type}": one stream per aggregate type,
// so that every aggregate's events share one stream and its order. Every
// XADD is an entry (Redis drops no duplicates), so Tapped and Stored both
// read the streams with XRANGE. Redis accepts any stream name, so there is
// no poison event type (a key holding another type is refused, which
// brokertest checks; an event type cannot name one under this topic).
type Redis struct{}

func (Redis) Setup(t *testing.T) *scenario.Destination {
	t.Helper()
	var rawURL string
	var stop, start func()
	if _, err := testenv.RedisBinary(); err == nil {
		srv := testenv.StartRedis(t)
		rawURL = srv.URL
		stop, start = srv.Kill, srv.Start
	} else {
		t.Logf("own redis-server unavailable (%v): using the shared server, which cannot be stopped", err)
		rawURL = testenv.URL(t, "TXBOX_TEST_REDIS")
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := newPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if keys, err := rdb.Keys(ctx, prefix+":*").Result(); err == nil && len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})

	streams := func(ctx context.Context) ([]string, error) {
		var out []string
		iter := rdb.ScanType(ctx, 0, prefix+":*", 100, "stream").Iterator()
		for iter.Next(ctx) {
			out = append(out, iter.Val())
		}
		slices.Sort(out)
		return out, iter.Err()
	}
	// What the streams hold, read incrementally, merged by entry id.
	type entry struct {
		ms, seq int64
		seen    scenario.Seen
	}
	var mu sync.Mutex
	read := map[string][]entry{}
	last := map[string]string{}
	stored := func() []scenario.Seen {
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if names, err := streams(ctx); err == nil {
			for _, st := range names {
				from := "-"
				if id := last[st]; id != "" {
					from = "(" + id
				}
				msgs, err := rdb.XRange(ctx, st, from, "+").Result()
				if err != nil {
					break
				}
				for _, m := range msgs {
					a, b, _ := strings.Cut(m.ID, "-")
					ms, _ := strconv.ParseInt(a, 10, 64)
					seq, _ := strconv.ParseInt(b, 10, 64)
					str := func(k string) string { s, _ := m.Values[k].(string); return s }
					read[st] = append(read[st], entry{ms, seq, scenario.Seen{
						EventID: str(redisbroker.FieldPrefix + "id"), AggregateID: str(redisbroker.FieldPrefix + "subject"), Type: str(redisbroker.FieldPrefix + "type"),
					}})
					last[st] = m.ID
				}
			}
		}
		var all []entry
		for _, es := range read {
			all = append(all, es...)
		}
		slices.SortStableFunc(all, func(x, y entry) int {
			if x.ms != y.ms {
				return int(x.ms - y.ms)
			}
			return int(x.seq - y.seq)
		})
		out := make([]scenario.Seen, len(all))
		for i, e := range all {
			out[i] = e.seen
		}
		return out
	}

	return &scenario.Destination{
		URL:   rawURL,
		Topic: prefix + ":{aggregate_type}",
		Publisher: func(t *testing.T) broker.Publisher {
			return testenv.Open(t, func(ctx context.Context) (*redisbroker.Publisher, error) {
				return redisbroker.Open(ctx, rawURL, redisbroker.Options{})
			})
		},
		Tapped: stored,
		Stored: func(*testing.T) []scenario.Seen { return stored() },
		Stop:   stop,
		Start:  start,
		Subscriber: func(t *testing.T, durable string) broker.Subscriber {
			return testenv.Open(t, func(ctx context.Context) (*redisbroker.Subscriber, error) {
				names, err := streams(ctx)
				if err != nil {
					return nil, err
				}
				if len(names) == 0 {
					names = []string{prefix + ":Order"}
				}
				return redisbroker.OpenSubscriber(ctx, rawURL, redisbroker.SubscriberOptions{Streams: names, Group: durable, AckWait: 5 * time.Second})
			})
		},
	}
}
