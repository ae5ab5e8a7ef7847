package postgres_test

import (
	"testing"

	"github.com/txbox/txbox/internal/storeenv"
	"github.com/txbox/txbox/store/storetest"
)

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, storeenv.Postgres{})
}

func TestInboxConformance(t *testing.T) {
	storetest.RunInbox(t, storeenv.Postgres{})
}
