package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres"
)

// drainEnv is one drain measurement's world: fresh outbox tables holding a
// pre-written backlog, and a fresh JetStream stream.
type drainEnv struct {
	pg     string
	natsU  string
	tables store.Tables
	stream string
	prefix string
	pool   *pgxpool.Pool
	js     jetstream.JetStream
	nc     *nats.Conn
}

func newDrainEnv(ctx context.Context, pg, natsURL string, events, aggs int) (*drainEnv, error) {
	e := &drainEnv{pg: pg, natsU: natsURL}
	sfx := strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	e.tables = store.Tables{Outbox: "bench_ob_" + sfx[:8], Inbox: "bench_ib_" + sfx[:8]}
	e.prefix = "bench" + sfx[:8]
	e.stream = strings.ToUpper(e.prefix)
	var err error
	if e.pool, err = pgxpool.New(ctx, pg); err != nil {
		return nil, err
	}
	s, err := postgres.New(e.pool, postgres.Options{Tables: e.tables, Logger: quiet()})
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	// A backlog of events with ~300-byte JSON payloads, spread over aggs
	// aggregates in write order, written by the database itself so the
	// setup takes seconds.
	_, err = e.pool.Exec(ctx, `INSERT INTO `+e.tables.Outbox+` (event_id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid()::text, 'Order', 'order-' || (g % $2), 'OrderCreated',
		       json_build_object('seq', g, 'customer', 'c-' || (g % 997), 'note', repeat('x', 240))
		FROM generate_series(1, $1) g`, events, aggs)
	if err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE `+e.tables.Outbox); err != nil {
		return nil, err
	}
	if e.nc, err = nats.Connect(natsURL); err != nil {
		return nil, err
	}
	e.js, _ = jetstream.New(e.nc)
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.prefix + ".>"}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *drainEnv) close() {
	ctx := context.Background()
	_ = e.js.DeleteStream(ctx, e.stream)
	e.nc.Close()
	for _, t := range []string{e.tables.Outbox, e.tables.Outbox + "_migrations", e.tables.Inbox, e.tables.Inbox + "_versions"} {
		_, _ = e.pool.Exec(ctx, "DROP TABLE IF EXISTS "+t)
	}
	e.pool.Close()
}

func (e *drainEnv) storedMsgs(ctx context.Context) uint64 {
	s, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.Msgs
}

// waitDrained polls the stream until it holds want messages.
func (e *drainEnv) waitDrained(ctx context.Context, want int, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		if int(e.storedMsgs(ctx)) >= want {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("drain timed out: %d of %d in the stream", e.storedMsgs(ctx), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procStats is what /proc says of a relay process.
type procStats struct {
	peakRSSKB int64
	cpu       time.Duration
}

func readProc(pid int) procStats {
	var ps procStats
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				f := strings.Fields(l)
				ps.peakRSSKB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ps.cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
	}
	return ps
}

// txboxBinary builds cmd/txbox of the enclosing module once.
func txboxBinary() (string, error) {
	p := filepath.Join(os.TempDir(), "txbox-bench-bin")
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	// Built in the library's own module, with its own go.mod: what users run.
	cmd := exec.Command("go", "build", "-o", p, "./cmd/txbox")
	cmd.Dir = filepath.Dir(filepath.Dir(strings.TrimSpace(string(gomod))))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build txbox: %v\n%s", err, out)
	}
	return p, nil
}

type drainResult struct {
	name    string
	events  int
	elapsed time.Duration
	rss     int64 // KB, peak of the largest relay process
	cpu     time.Duration
}

func (r drainResult) rate() float64 { return float64(r.events) / r.elapsed.Seconds() }

// drainTxbox runs `txbox relay` processes over the backlog until the stream
// holds every event.
func drainTxbox(ctx context.Context, e *drainEnv, bin string, events, procs int, extra ...string) (drainResult, error) {
	args := []string{"relay", "--db", e.pg, "--outbox-table", e.tables.Outbox, "--inbox-table", e.tables.Inbox,
		"--broker", e.natsU, "--nats-stream", e.stream, "--topic", e.prefix + ".{aggregate_type}.{event_type}",
		"--log-level", "error", "--poll-interval", "50ms"}
	args = append(args, extra...)
	var cmds []*exec.Cmd
	for i := range procs {
		c := exec.Command(bin, append(args, "--relay-id", fmt.Sprintf("bench-%d", i))...)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return drainResult{}, err
		}
		cmds = append(cmds, c)
	}
	elapsed, err := e.waitDrained(ctx, events, 30*time.Minute)
	res := drainResult{events: events, elapsed: elapsed}
	for _, c := range cmds {
		ps := readProc(c.Process.Pid)
		res.rss = max(res.rss, ps.peakRSSKB)
		res.cpu += ps.cpu
		_ = c.Process.Signal(os.Interrupt)
		_ = c.Wait()
	}
	return res, err
}

// drainRaw is the hand-written limit: in one transaction claim a batch with
// FOR UPDATE SKIP LOCKED, publish it asynchronously with Nats-Msg-Id, wait
// for the acks, DELETE the batch, commit. No ordering lanes, no leases, no
// retries: what a relay costs without its guarantees.
func drainRaw(ctx context.Context, e *drainEnv, events, batch int) (drainResult, error) {
	js, err := jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return drainResult{}, err
	}
	start := time.Now()
	sent := 0
	for sent < events {
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id, event_id, aggregate_type, event_type, payload::text FROM `+e.tables.Outbox+`
				WHERE status = 'PENDING' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, batch)
			if err != nil {
				return err
			}
			var ids []int64
			var futs []jetstream.PubAckFuture
			for rows.Next() {
				var id int64
				var eid, at, et, payload string
				if err := rows.Scan(&id, &eid, &at, &et, &payload); err != nil {
					return err
				}
				m := nats.NewMsg(e.prefix + "." + at + "." + et)
				m.Header.Set("Nats-Msg-Id", eid)
				m.Data = []byte(payload)
				f, err := js.PublishMsgAsync(m)
				if err != nil {
					return err
				}
				ids = append(ids, id)
				futs = append(futs, f)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM `+e.tables.Outbox+` WHERE id = ANY($1)`, ids); err != nil {
				return err
			}
			sent += len(ids)
			return nil
		})
		if err != nil {
			return drainResult{}, err
		}
	}
	return drainResult{events: events, elapsed: time.Since(start)}, nil
}

func drainCmd(args []string) error {
	fs := flag.NewFlagSet("drain", flag.ExitOnError)
	pg := fs.String("db", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	natsURL := fs.String("broker", "nats://127.0.0.1:4222", "NATS URL")
	events := fs.Int("events", 1_000_000, "backlog size")
	aggs := fs.Int("aggregates", 100_000, "aggregates the backlog is spread over")
	runs := fs.Int("runs", 3, "runs per contender")
	batch := fs.Int("batch", 1000, "batch size for every contender")
	which := fs.String("only", "raw,txbox,txbox-delete,txbox-2proc", "contenders, comma separated")
	_ = fs.Parse(args)
	ctx := context.Background()
	bin, err := txboxBinary()
	if err != nil {
		return err
	}
	contenders := map[string]func(*drainEnv) (drainResult, error){
		"raw": func(e *drainEnv) (drainResult, error) { return drainRaw(ctx, e, *events, *batch) },
		"txbox": func(e *drainEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, *events, 1, "--batch-size", strconv.Itoa(*batch))
		},
		"txbox-delete": func(e *drainEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, *events, 1, "--batch-size", strconv.Itoa(*batch), "--delete-sent")
		},
		"txbox-2proc": func(e *drainEnv) (drainResult, error) {
			return drainTxbox(ctx, e, bin, *events, 2, "--batch-size", strconv.Itoa(*batch), "--delete-sent")
		},
	}
	results := map[string][]drainResult{}
	order := strings.Split(*which, ",")
	for r := range *runs {
		for _, name := range order {
			run, ok := contenders[name]
			if !ok {
				return fmt.Errorf("unknown contender %q", name)
			}
			e, err := newDrainEnv(ctx, *pg, *natsURL, *events, *aggs)
			if err != nil {
				return err
			}
			res, err := run(e)
			e.close()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res.name = name
			results[name] = append(results[name], res)
			fmt.Printf("  run %d %-14s %8.0f events/s  (%v, peak RSS %d MB, CPU %v)\n", r+1, name, res.rate(), res.elapsed.Round(time.Millisecond), res.rss/1024, res.cpu.Round(10*time.Millisecond))
		}
	}
	fmt.Printf("\ndrain of %d events over %d aggregates, batch %d, medians of %d runs\n", *events, *aggs, *batch, *runs)
	fmt.Printf("| contender | events/s (median) | vs raw | peak RSS (MB, median) |\n|---|---|---|---|\n")
	rawRate := medianBy(results["raw"], drainResult.rate)
	for _, name := range order {
		rate := medianBy(results[name], drainResult.rate)
		rss := medianBy(results[name], func(r drainResult) float64 { return float64(r.rss) / 1024 })
		ratio := "-"
		if rawRate > 0 {
			ratio = fmt.Sprintf("%.2f", rate/rawRate)
		}
		fmt.Printf("| %s | %.0f | %s | %.0f |\n", name, rate, ratio, rss)
	}
	return nil
}

func medianBy(rs []drainResult, f func(drainResult) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}
