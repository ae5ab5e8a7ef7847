package examples_test

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/testenv"
)

// TestOrderFlow runs the example as a user would: the order service writes
// 100 orders (10 rolled back), `txbox relay` delivers, the inventory service
// reserves stock. It uses a database and a nats-server of its own.
func TestOrderFlow(t *testing.T) {
	base := testenv.URL(t, "TXBOX_TEST_POSTGRES")
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	dbName := "txbox_example_" + strings.ReplaceAll(txbox.NewID()[24:], "-", "")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)") })
	// The example's own database on the same server, whatever database
	// and parameters TXBOX_TEST_POSTGRES names.
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TXBOX_TEST_POSTGRES=%s: %v", base, err)
	}
	u.Path = "/" + dbName
	db := u.String()
	nats := testenv.StartNATS(t)

	bin := t.TempDir()
	for _, name := range []string{"orderservice", "inventoryservice"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./"+name).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(bin, "orderservice"), "-db", db, "-orders", "100").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "placed 90 orders, rolled back 10") {
		t.Fatalf("orderservice: %v\n%s", err, out)
	}
	txbox := testenv.Binary(t)
	scenario.Start(t, txbox, "relay", "--db", db, "--broker", nats.URL, "--nats-create-stream", "--poll-interval", "50ms")
	scenario.Start(t, filepath.Join(bin, "inventoryservice"), "-db", db, "-nats", nats.URL)

	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	var n int
	for time.Now().Before(deadline) {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM inventory_reservations`).Scan(&n); err == nil && n == 90 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != 90 {
		t.Fatalf("%d reservations, want 90", n)
	}
	var orphans int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM inventory_reservations r LEFT JOIN shop_orders o ON o.id = r.order_id WHERE o.id IS NULL`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("reservations for rolled-back orders: %d (%v)", orphans, err)
	}
	stats, err := scenario.RunCmd(t, txbox, "stats", "--db", db)
	if err != nil || !strings.Contains(stats, "SENT         90") {
		t.Fatalf("stats: %v\n%s", err, stats)
	}
}
