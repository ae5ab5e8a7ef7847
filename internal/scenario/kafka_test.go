package scenario_test

import (
	"testing"

	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/storeenv"
)

// TestPostgresKafka runs every scenario against an in-process Kafka cluster
// (franz-go's kfake: there is no Kafka server here) that the txbox binary
// reaches over TCP.
func TestPostgresKafka(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.Kafka{}) }
