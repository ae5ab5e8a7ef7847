package storeenv

import (
	"context"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/outbox"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/storetest"
)

// Write commits events to s's outbox in one transaction of h's
// (storetest.InTx), as a producer would.
func Write(t *testing.T, h storetest.Beginner, s store.Store, events ...txbox.Event) {
	t.Helper()
	storetest.InTx(t, h, s, func(tx store.Tx) error { return outbox.NewWriter(s.Dialect()).Add(context.Background(), tx, events...) })
}
