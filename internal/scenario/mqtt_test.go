package scenario_test

import (
	"testing"

	"github.com/txbox/txbox/internal/brokerenv"
	"github.com/txbox/txbox/internal/scenario"
	"github.com/txbox/txbox/internal/storeenv"
)

func TestPostgresMQTT(t *testing.T) { scenario.Run(t, storeenv.Postgres{}, brokerenv.MQTT{}) }
