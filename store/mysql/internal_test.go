package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/internal/sqlinbox"
)

func TestConfig(t *testing.T) {
	cfg, err := Config("mysql://app:s%40cret@db.example:3307/shop?tls=skip-verify&timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "s@cret" || cfg.Net != "tcp" || cfg.Addr != "db.example:3307" || cfg.DBName != "shop" ||
		!cfg.ParseTime || cfg.Loc != time.UTC || !cfg.InterpolateParams || cfg.TLSConfig != "skip-verify" || cfg.Timeout != 5*time.Second {
		t.Fatalf("config: %+v", cfg)
	}
	cfg, err = Config("mysql://root@127.0.0.1/test?interpolateParams=false")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:3306" || cfg.Passwd != "" || cfg.InterpolateParams {
		t.Fatalf("defaults: %+v", cfg)
	}
	cfg, err = Config("mysql://root@/test?socket=/run/mysqld/mysqld.sock")
	if err != nil || cfg.Net != "unix" || cfg.Addr != "/run/mysqld/mysqld.sock" {
		t.Fatalf("socket: %+v %v", cfg, err)
	}
	dsn, err := DSN("mysql://root@127.0.0.1:3306/test")
	if err != nil || !strings.HasPrefix(dsn, "root@tcp(127.0.0.1:3306)/test?") || !strings.Contains(dsn, "parseTime=true") {
		t.Fatalf("dsn %q %v", dsn, err)
	}
	for _, bad := range []string{
		"mysql://u:hunter2@host:port/db",           // bad port
		"mysql://u:hunter2@host:3306/",             // no database
		"postgres://u:hunter2@host:3306/db",        // wrong scheme
		"mysql://u:hunter2@host:3306/db?timeout=x", // bad driver parameter
		"mysql://u:hunter2@/db",                    // no host
	} {
		_, err := Config(bad)
		if !errors.Is(err, txbox.ErrConfig) {
			t.Errorf("%s: %v, want a config error", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

func TestOpenErrorHidesPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := testenv.URL(t, "TXBOX_TEST_MYSQL")
	bad := strings.Replace(u, "mysql://root@", "mysql://root:hunter2@", 1)
	if bad == u {
		t.Skip("test URL already carries credentials")
	}
	_, err := Open(ctx, bad, Options{})
	if err == nil {
		t.Skip("server accepted any password")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestNewValidatesNames(t *testing.T) {
	if _, err := New(nil, Options{Tables: store.Tables{Outbox: strings.Repeat("x", 54)}}); !errors.Is(err, txbox.ErrConfig) {
		t.Fatalf("54-character outbox name: %v", err)
	}
	if _, err := New(nil, Options{Tables: store.Tables{Inbox: strings.Repeat("x", 54)}}); !errors.Is(err, txbox.ErrConfig) {
		t.Fatalf("54-character inbox name: %v", err)
	}
	if _, err := New(nil, Options{Tables: store.Tables{Outbox: "o; DROP TABLE x"}}); !errors.Is(err, txbox.ErrConfig) {
		t.Fatalf("bad identifier: %v", err)
	}
}

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- c;\nCREATE TABLE a (\n  x INT -- inline\n);\n\nCREATE INDEX i ON a (x);\n")
	if len(got) != 2 || !strings.HasPrefix(got[0], "CREATE TABLE a") || got[1] != "CREATE INDEX i ON a (x)" {
		t.Fatalf("%q", got)
	}
	if m := createIndexRE.FindStringSubmatch(got[1]); m == nil || m[1] != "i" || m[3] != "a" {
		t.Fatalf("index match %q", m)
	}
}

func openTest(t *testing.T, opts Options) *Store {
	t.Helper()
	u := testenv.URL(t, "TXBOX_TEST_MYSQL")
	suffix := txbox.NewID()[24:]
	opts.Tables = store.Tables{Outbox: "outbox_i" + suffix, Inbox: "inbox_i" + suffix}
	s, err := Open(context.Background(), u, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tbl := range []string{s.q.table, s.q.sent, opts.Tables.Outbox + "_migrations", opts.Tables.Inbox, opts.Tables.Inbox + "_versions"} {
			_, _ = s.db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
		s.Close()
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, s *Store, events ...txbox.Event) {
	t.Helper()
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.NewWriter(s.Dialect()).Add(context.Background(), store.SQLTx(tx), events...); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A claim in progress must not hold gap locks that stall producers: the
// reason claims run at READ COMMITTED.
func TestClaimDoesNotBlockProducers(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	write(t, s, txbox.MustEvent("Order", "a", "E", 1), txbox.MustEvent("Order", "b", "E", 1))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.claim(ctx, tx, store.ClaimRequest{Lease: "L", Limit: 10, LeaseFor: time.Minute}); err != nil {
			return err
		}
		// Still inside the claim's transaction: a producer inserts.
		done := make(chan error, 1)
		go func() {
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			ptx, err := s.db.BeginTx(pctx, nil)
			if err != nil {
				done <- err
				return
			}
			if err := s.Dialect().InsertEvents(pctx, store.SQLTx(ptx), []txbox.Event{txbox.MustEvent("Order", "c", "E", 1)}); err != nil {
				ptx.Rollback()
				done <- err
				return
			}
			done <- ptx.Commit()
		}()
		return <-done
	})
	if err != nil {
		t.Fatalf("producer blocked by an open claim: %v", err)
	}
}

// Delivered rows leave the hot table: archived with their sent time, or
// deleted with DeleteSent. List and Stats still see archived rows.
func TestArchive(t *testing.T) {
	ctx := context.Background()
	for _, del := range []bool{false, true} {
		s := openTest(t, Options{DeleteSent: del})
		a1, b1 := txbox.MustEvent("Order", "a", "E", 1), txbox.MustEvent("Order", "b", "E", 1)
		write(t, s, a1, b1)
		recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "L", Limit: 10, LeaseFor: time.Minute})
		if err != nil || len(recs) != 2 {
			t.Fatalf("claim: %v %d", err, len(recs))
		}
		if n, err := s.MarkSent(ctx, "other", []int64{recs[0].ID}); err != nil || n != 0 {
			t.Fatalf("stale mark: %d %v", n, err)
		}
		if n, err := s.MarkSent(ctx, "L", []int64{recs[0].ID, recs[0].ID}); err != nil || n != 1 {
			t.Fatalf("mark: %d %v", n, err)
		}
		var hot, archived int
		s.db.QueryRow("SELECT COUNT(*) FROM " + s.q.table).Scan(&hot)
		s.db.QueryRow("SELECT COUNT(*) FROM " + s.q.sent).Scan(&archived)
		wantArchived := 1
		if del {
			wantArchived = 0
		}
		if hot != 1 || archived != wantArchived {
			t.Fatalf("DeleteSent=%v: hot %d archived %d", del, hot, archived)
		}
		all, err := s.List(ctx, store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		sent, err := s.List(ctx, store.Filter{Status: txbox.StatusSent, EventIDs: []string{a1.ID}})
		if err != nil {
			t.Fatal(err)
		}
		if del {
			if len(all) != 1 || len(sent) != 0 {
				t.Fatalf("DeleteSent list: %d %d", len(all), len(sent))
			}
			continue
		}
		if len(all) != 2 || all[0].EventID != a1.ID || all[0].Status != txbox.StatusSent || all[0].SentAt == nil || all[0].LockedBy != "" ||
			all[1].Status != txbox.StatusProcessing {
			t.Fatalf("list: %+v", all)
		}
		if len(sent) != 1 || string(sent[0].Payload) != string(a1.Payload) || !sent[0].OccurredAt.Equal(a1.OccurredAt.Truncate(time.Microsecond)) {
			t.Fatalf("archived row: %+v", sent)
		}
		if st, err := s.Stats(ctx); err != nil || st.Counts[txbox.StatusSent] != 1 || st.Counts[txbox.StatusProcessing] != 1 {
			t.Fatalf("stats: %+v %v", st, err)
		}
	}
}

// TestQueryPlans pins the claim's access paths: the unsent index for the
// heads scan and the range between heads, the aggregate index for the
// first-unsent probe and the runs, the primary key for the lock. A plan
// that reads the whole table (type ALL) would make claims slow down with
// the number of DEAD rows.
func TestQueryPlans(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	runQ, runArgs := s.q.runQuery([]head{{id: 1, aggType: "Order", aggID: "a"}, {id: 2, aggType: "Order", aggID: "b"}}, 64)
	replays := store.InboxFilter{Consumer: "c", Status: txbox.StatusReplay, Limit: 64}
	replayWhere, replayArgs := inboxFilter(replays)
	for _, q := range []struct {
		name string
		sql  string
		args []any
		keys []string
	}{
		{"heads", s.q.heads, []any{10}, []string{"unsent_idx", "aggregate_unsent_idx"}},
		{"between", s.q.between, []any{1, 100}, []string{"unsent_idx"}},
		{"runs", runQ, runArgs, []string{"aggregate_unsent_idx"}},
		{"lock", s.q.lock.With("1, 2"), []any{1000}, []string{"PRIMARY"}},
		{"inbox replays", sqlinbox.ListQuery(s.inboxTable(), replayWhere, replays), replayArgs, nil}, // monitor_idx or cleanup_idx: both range on status
		{"inbox cleanup", s.q.inboxCleanup, []any{"PROCESSED", 1000, 10}, []string{"cleanup_idx"}},
		{"inbox counts", sqlinbox.CountsQuery(s.inboxTable()), nil, []string{"monitor_idx"}},
	} {
		rows, err := s.db.QueryContext(ctx, "EXPLAIN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		cols, _ := rows.Columns()
		var used []string
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			row := map[string]string{}
			for i, c := range cols {
				row[c] = vals[i].String
			}
			if row["table"] == "" || strings.HasPrefix(row["table"], "<union") {
				continue
			}
			if row["type"] == "ALL" {
				t.Errorf("%s reads all of %s: %v", q.name, row["table"], row)
			}
			used = append(used, row["key"])
		}
		rows.Close()
		for _, k := range q.keys {
			if !slices.Contains(used, k) {
				t.Errorf("%s: index %s not used (used %v)", q.name, k, used)
			}
		}
	}
}

// A hand-written RETRY row without next_retry_at is never deliverable, and
// it must stop its aggregate: the row behind it may not be claimed.
func TestNullTimesBlockTheRun(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	for _, st := range []string{"PENDING", "RETRY", "PENDING"} {
		if _, err := s.db.Exec("INSERT INTO "+s.q.table+" (event_id, aggregate_type, aggregate_id, event_type, payload, status) VALUES (?, 'A', 'a', 'E', '{}', ?)", txbox.NewID(), st); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Claim(ctx, store.ClaimRequest{Lease: "L", Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(recs) != 1 || recs[0].Status != txbox.StatusProcessing {
		t.Fatalf("want only the first row: %v %+v", err, recs)
	}
}

// Migrate is idempotent step by step: after a crash between statements
// (simulated: an index gone, the version not recorded) it completes.
func TestMigrateResumes(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if _, err := s.db.Exec("DROP INDEX status_idx ON " + s.q.table); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("DROP INDEX cleanup_idx ON " + s.inboxTable()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("DELETE FROM " + s.tables.Outbox + "_migrations"); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	for table, index := range map[string]string{s.tables.Outbox: "status_idx", s.tables.Inbox: "cleanup_idx"} {
		if err := s.db.QueryRow(`SELECT COUNT(*) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ?`, table, index).Scan(&n); err != nil || n == 0 {
			t.Fatalf("%s not recreated: %d %v", index, n, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
