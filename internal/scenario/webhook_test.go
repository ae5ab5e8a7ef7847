package scenario_test

import (
	"testing"

	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/storeenv"
)

func TestPostgresWebhook(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.Webhook{}) }
