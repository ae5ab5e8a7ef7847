package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/open"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// consoleCmd answers: does the admin console's API stay fast on a million
// dead rows? It fills a fresh outbox table with --rows DEAD rows in one
// INSERT ... SELECT generate_series (PostgreSQL), then times the API's
// answers in-process (handler, SQL and JSON; no network): first page, deep
// keyset pages, each filter, the count a bulk action shows, and the
// overview. Medians of --runs after one warm-up.
func consoleCmd(args []string) error {
	fs := flag.NewFlagSet("console", flag.ExitOnError)
	db := fs.String("db", defaultPG, "PostgreSQL URL")
	rows := fs.Int("rows", 1_000_000, "dead rows")
	runs := fs.Int("runs", 9, "timed requests per case")
	_ = fs.Parse(args)
	ctx := context.Background()
	sfx := txbox.NewID()[24:]
	tb := store.Tables{Outbox: "bench_cons" + sfx[:6], Inbox: "bench_consib" + sfx[:6]}
	s, err := open.Store(ctx, *db, open.StoreOptions{Tables: tb, Logger: quiet()})
	if err != nil {
		return err
	}
	defer func() { dropTables(ctx, s, tb); s.Close() }()
	ps, ok := s.(*postgres.Store)
	if !ok {
		return fmt.Errorf("console: --db must be PostgreSQL (the fill uses generate_series)")
	}
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	start := time.Now()
	table := tb.Qualified(tb.Outbox)
	// One row in ten is an OrderCancelled, one in a hundred timed out;
	// aggregates repeat every 10,000 rows; created_at is one second apart.
	_, err = ps.Pool().Exec(ctx, `INSERT INTO `+table+` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
			payload, status, retry_count, last_error, occurred_at, created_at)
		SELECT 'ev-' || i, 'Order', 'order-' || (i % 10000), i / 10000,
			CASE WHEN i % 10 = 0 THEN 'OrderCancelled' ELSE 'OrderPlaced' END,
			json_build_object('order', i, 'items', json_build_array('book', 'pen'), 'total', i * 0.01),
			'DEAD', 10,
			CASE WHEN i % 100 = 0 THEN 'nats: timeout after 30s' ELSE 'nats: permissions violation for publish to outbox.Order' END,
			now() - ($1 - i) * interval '1 second', now() - ($1 - i) * interval '1 second'
		FROM generate_series(1, $1::int) AS i`, *rows)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	if _, err := ps.Pool().Exec(ctx, `VACUUM ANALYZE `+table); err != nil {
		return err
	}
	fmt.Printf("console API on %d dead rows (PostgreSQL, filled in %v), %d runs per case, db %s\n\n",
		*rows, time.Since(start).Round(time.Second), *runs, open.Redact(*db))

	c, err := console.New(s, console.Options{Logger: quiet()})
	if err != nil {
		return err
	}
	mid := strconv.Itoa(*rows / 2)
	since := time.Now().Add(-time.Duration(*rows/2) * time.Second).UTC().Format(time.RFC3339)
	until := time.Now().Add(-time.Duration(*rows/2-3600) * time.Second).UTC().Format(time.RFC3339)
	cases := []struct{ name, path string }{
		{"first page (50)", "/api/dead"},
		{"keyset page in the middle", "/api/dead?before=" + mid},
		{"keyset page at the end", "/api/dead?before=60"},
		{"page of 1000", "/api/dead?limit=1000"},
		{"filter event_type (1 in 10)", "/api/dead?event_type=OrderCancelled"},
		{"filter error text (1 in 100)", "/api/dead?error=timeout"},
		{"filter time range (1 h)", "/api/dead?since=" + since + "&until=" + until},
		{"filter aggregate (1 in 10,000)", "/api/dead?aggregate_type=Order&aggregate_id=order-42"},
		{"details", "/api/dead/event?id=ev-" + mid},
		{"count, all dead", "/api/dead/count?all=1"},
		{"count, error text", "/api/dead/count?error=timeout"},
		{"overview", "/api/overview"},
	}
	fmt.Println("| request | median | min | max | rows |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, cs := range cases {
		var ds []time.Duration
		var body string
		for r := 0; r <= *runs; r++ {
			req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+cs.path, nil)
			req.RemoteAddr = "127.0.0.1:1"
			w := httptest.NewRecorder()
			t := time.Now()
			c.ServeHTTP(w, req)
			d := time.Since(t)
			if w.Code != http.StatusOK {
				return fmt.Errorf("%s: %d %s", cs.path, w.Code, w.Body.String())
			}
			body = w.Body.String()
			if r > 0 { // the first is the warm-up
				ds = append(ds, d)
			}
		}
		slices.Sort(ds)
		fmt.Printf("| `GET %s` (%s) | %s | %s | %s | %d |\n", shorten(cs.path), cs.name, msec(ds[len(ds)/2]), msec(ds[0]), msec(ds[len(ds)-1]),
			strings.Count(body, `"event_id"`))
	}
	return nil
}

func msec(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func shorten(p string) string {
	if len(p) > 60 {
		return p[:57] + "..."
	}
	return p
}
