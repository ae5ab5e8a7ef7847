package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// consoleCmd answers: does the admin console's API stay fast on a million
// dead rows? It fills a fresh outbox table with --rows DEAD rows in one
// INSERT ... SELECT over a generated series (generate_series on PostgreSQL,
// MariaDB's seq_1_to_N, a recursive CTE on SQLite), then times the API's
// answers in-process (handler, SQL and JSON; no network): first page, deep
// keyset pages, each filter, the count a bulk action shows, and the
// overview. Medians of --runs after one warm-up.
func consoleCmd(args []string) error {
	fs := newFlags("console")
	db := fs.String("db", defaultPG, "database URL: postgres://, mysql:// (MariaDB) or sqlite://")
	rows := fs.Int("rows", 1_000_000, "dead rows")
	runs := fs.Int("runs", 9, "timed requests per case")
	fs.parse(args)
	ctx := context.Background()
	s, drop, err := freshStore(ctx, *db, "bench_cons", "bench_consib")
	if err != nil {
		return err
	}
	defer drop()
	start := time.Now()
	if err := fillDead(ctx, s, s.Tables(), *rows); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	fmt.Printf("console API on %d dead rows (%s, filled in %v), %d runs per case, db %s\n\n",
		*rows, s.Dialect().Name(), time.Since(start).Round(time.Second), *runs, redact.URL(*db))

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

// fillDead writes n DEAD rows in one statement: one in ten an
// OrderCancelled, one in a hundred timed out, aggregates repeating every
// 10,000 rows, created one second apart up to now. Then it refreshes the
// planner's statistics.
func fillDead(ctx context.Context, s store.Store, tb store.Tables, n int) error {
	cols := `(event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, retry_count, last_error, occurred_at, created_at)`
	const (
		errTimeout = `'nats: timeout after 30s'`
		errPerm    = `'nats: permissions violation for publish to outbox.Order'`
	)
	var fill, analyze string
	switch s.Dialect().Name() {
	case "postgres":
		table := tb.Qualified(tb.Outbox)
		fill = fmt.Sprintf(`INSERT INTO %s %s
		SELECT 'ev-' || i, 'Order', 'order-' || (i %% 10000), i / 10000,
			CASE WHEN i %% 10 = 0 THEN 'OrderCancelled' ELSE 'OrderPlaced' END,
			json_build_object('order', i, 'items', json_build_array('book', 'pen'), 'total', i * 0.01),
			'DEAD', 10, CASE WHEN i %% 100 = 0 THEN %s ELSE %s END,
			now() - (%d - i) * interval '1 second', now() - (%d - i) * interval '1 second'
		FROM generate_series(1, %d) AS i`, table, cols, errTimeout, errPerm, n, n, n)
		analyze = `VACUUM ANALYZE ` + table
	case "mysql":
		fill = fmt.Sprintf(`INSERT INTO %s %s
		SELECT CONCAT('ev-', seq), 'Order', CONCAT('order-', seq %% 10000), seq DIV 10000,
			IF(seq %% 10 = 0, 'OrderCancelled', 'OrderPlaced'),
			JSON_OBJECT('order', seq, 'items', JSON_ARRAY('book', 'pen'), 'total', seq * 0.01),
			'DEAD', 10, IF(seq %% 100 = 0, %s, %s),
			UTC_TIMESTAMP(6) - INTERVAL (%d - seq) SECOND, UTC_TIMESTAMP(6) - INTERVAL (%d - seq) SECOND
		FROM seq_1_to_%d`, tb.Outbox, cols, errTimeout, errPerm, n, n, n)
		analyze = `ANALYZE TABLE ` + tb.Outbox
	case "sqlite":
		now := time.Now().UnixMicro()
		fill = fmt.Sprintf(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < %d)
		INSERT INTO %s %s
		SELECT 'ev-' || i, 'Order', 'order-' || (i %% 10000), i / 10000,
			CASE WHEN i %% 10 = 0 THEN 'OrderCancelled' ELSE 'OrderPlaced' END,
			json_object('order', i, 'items', json_array('book', 'pen'), 'total', i * 0.01),
			'DEAD', 10, CASE WHEN i %% 100 = 0 THEN %s ELSE %s END,
			%d - (%d - i) * 1000000, %d - (%d - i) * 1000000
		FROM seq`, n, tb.Outbox, cols, errTimeout, errPerm, now, n, now, n)
		analyze = `ANALYZE`
	default:
		return fmt.Errorf("no fill for %s", s.Dialect().Name())
	}
	if err := inTx(ctx, s, func(tx store.Tx) error { _, err := tx.Exec(ctx, fill); return err }); err != nil {
		return err
	}
	// VACUUM cannot run in a transaction; the others do not mind.
	if ps, ok := s.(*postgres.Store); ok {
		_, err := ps.Pool().Exec(ctx, analyze)
		return err
	}
	return inTx(ctx, s, func(tx store.Tx) error { _, err := tx.Exec(ctx, analyze); return err })
}
