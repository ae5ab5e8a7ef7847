package adaptertest

import (
	"testing"

	"github.com/txbox/txbox/internal/testenv"
)

// Server is the broker server a conformance run uses, with how to stop
// and start it again for the broker-down case; Stop and Start are nil for
// the shared server, which a test must not stop.
type Server struct {
	URL         string
	Stop, Start func(*testing.T)
}

// OwnOrShared is a server of the test's own, made by own, when its binary
// (binary finds it) is there or TXBOX_REQUIRE_SERVICES=1 asks for it; else
// the shared one whose URL is in env, and the broker-down case is skipped.
func OwnOrShared(t *testing.T, name string, binary func() (string, error), env string, own func(*testing.T) Server) Server {
	t.Helper()
	if _, err := binary(); err != nil && !testenv.Required() {
		t.Logf("own %s unavailable (%v): using the shared server; BrokerDown will be skipped", name, err)
		return Server{URL: testenv.URL(t, env)}
	}
	return own(t)
}
