package scenario_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/internal/testenv"
)

// TestMain also stops the private PostgreSQL the CDC scenarios may have
// shared (when the shared server lacks logical decoding).
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(testenv.RunPackage(m))
}

func TestPostgresNATS(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.NATS{}) }

// TestPostgresLeaseClaimsNATS: the same scenarios with `--claims lease`,
// the mode for PgBouncer's statement pooling, where no claim may hold a
// transaction open.
func TestPostgresLeaseClaimsNATS(t *testing.T) {
	scenario.Run(t, scenario.LeaseClaims{Store: storeenv.Postgres{}}, brokerenv.NATS{})
}

// TestPostgresCDCNATS: the same scenarios with relays reading the
// PostgreSQL log (`txbox relay --mode cdc`) instead of polling, on a
// database with logical decoding (the shared server's, or a private one).
func TestPostgresCDCNATS(t *testing.T) {
	st := scenario.CDC{Store: storeenv.Postgres{Logical: true}}
	scenario.Run(t, st, brokerenv.NATS{})
	t.Run("StandbyTakeover", func(t *testing.T) { scenario.CDCStandbyTakeover(t, st, brokerenv.NATS{}) })
}

func TestMariaDBNATS(t *testing.T) { scenario.Run(t, storeenv.MySQL{}, brokerenv.NATS{}) }

func TestSQLiteNATS(t *testing.T) { scenario.Run(t, storeenv.SQLite{}, brokerenv.NATS{}) }

// TestPostgresKafka runs every scenario against an in-process Kafka cluster
// (franz-go's kfake: there is no Kafka server here) that the txbox binary
// reaches over TCP.
func TestPostgresKafka(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.Kafka{}) }

func TestPostgresMQTT(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.MQTT{}) }

func TestPostgresRabbitMQ(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.RabbitMQ{}) }

func TestPostgresRedis(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.Redis{}) }

func TestPostgresWebhook(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.Webhook{}) }
