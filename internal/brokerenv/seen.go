package brokerenv

import (
	"strings"
	"sync"
	"testing"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/scenario"
)

// newPrefix names one test's topics, streams and queues, so that tests
// sharing a broker never read each other's messages.
func newPrefix() string {
	return "t" + strings.ReplaceAll(txbox.NewID()[24:], "-", "")
}

// seenLog is what a tap or a reader saw: the broker's callbacks and
// goroutines add to it while the scenario reads copies of it.
type seenLog struct {
	mu   sync.Mutex
	seen []scenario.Seen
}

func (l *seenLog) add(s ...scenario.Seen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, s...)
}

// all returns a copy, which the caller may keep while more is added.
func (l *seenLog) all() []scenario.Seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]scenario.Seen(nil), l.seen...)
}

// stored is all in the shape of scenario.Destination.Stored.
func (l *seenLog) stored(*testing.T) []scenario.Seen { return l.all() }
