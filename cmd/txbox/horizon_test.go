package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/testenv"
)

// A transaction held open beside the relay, as a report does: the relay's
// gauge shows its age, its log warns once naming the session, /readyz
// stays 200 and says so, and both clear once it ends; in both modes.
func TestRelayWarnsOfLongTransaction(t *testing.T) {
	for _, mode := range []string{"poll", "cdc"} {
		t.Run(mode, func(t *testing.T) { testWarnsOfLongTransaction(t, mode) })
	}
}

func testWarnsOfLongTransaction(t *testing.T, mode string) {
	dest := brokerenv.NATS{}.Setup(t)
	args, conn, outbox := startupTables(t, mode)
	id := insertEvent(t, conn, outbox)
	p := startRelayProcess(t, nil, append(append(args, "--broker", dest.URL, "--topic", dest.Topic, "--long-transaction-warn", "3s"), dest.Args...)...)
	p.waitReadyAndDelivered(t, 1)
	waitStored(t, dest, id)

	ctx := context.Background()
	cfg, err := pgx.ParseConfig(flagValue(args, "--db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "quarterly-report"
	report, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close(ctx)
	tx, err := report.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+outbox).Scan(&n); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the gauge, the warning and /readyz's word of the open transaction", func() bool {
		p.mustRun(t)
		sc, _ := scrapeURL(t, p.base+"/metrics")
		code, body := probe(p.base + "/readyz")
		return sc.value("txbox_db_oldest_transaction_age_seconds") > 3 && code == 200 &&
			strings.Contains(body, "warning: database: a transaction has been open for") && strings.Contains(body, "quarterly-report") &&
			strings.Contains(p.logs.String(), "holds back the cleanup of the dead rows")
	})
	if c := strings.Count(p.logs.String(), "holds back the cleanup of the dead rows"); c != 1 {
		t.Fatalf("the warning was logged %d times, want once while the transaction lasts:\n%s", c, p.logs.String())
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the end of the long transaction in the log and /readyz", func() bool {
		_, body := probe(p.base + "/readyz")
		return strings.Contains(p.logs.String(), "the long transaction ended") && strings.TrimSpace(body) == "ok"
	})
}
