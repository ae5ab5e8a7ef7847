package store_test

import (
	"testing"

	"github.com/txbox/txbox/store"
)

// HeldBehind reads back the DEAD event HoldReason names, and nothing from
// any other text.
func TestHeldBehind(t *testing.T) {
	if id, ok := store.HeldBehind(store.HoldReason("ev-1")); !ok || id != "ev-1" {
		t.Fatalf("HeldBehind(HoldReason(ev-1)) = %q %v", id, ok)
	}
	for _, s := range []string{"", "permanent: poison", "held: the earlier event x"} {
		if id, ok := store.HeldBehind(s); ok {
			t.Fatalf("HeldBehind(%q) = %q, true", s, id)
		}
	}
}
