package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// NATSServer is a JetStream-enabled nats-server of the test's own.
type NATSServer struct {
	*Process
	URL string // nats://127.0.0.1:Port
}

// NATSBinary finds nats-server: $TXBOX_NATS_SERVER, PATH, /usr/sbin.
func NATSBinary() (string, error) {
	if p := os.Getenv("TXBOX_NATS_SERVER"); p != "" {
		return p, nil
	}
	return findBinary("nats-server", "nats-server", "/usr/sbin/nats-server")
}

// StartNATS starts a JetStream-enabled nats-server on 127.0.0.1 and stops
// it when the test ends. Without the binary the test is skipped (or fails
// under TXBOX_REQUIRE_SERVICES=1). The port accepting connections does not
// mean JetStream has recovered its store: clients must cope with that.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	bin, err := NATSBinary()
	if err != nil {
		Missing(t, err.Error())
	}
	p := newProcess(t, "nats-server", t.TempDir(), func(port int, dir string) []string {
		return []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir,
			"-l", filepath.Join(dir, "server.log")}
	})
	s := &NATSServer{Process: p, URL: "nats://127.0.0.1:" + strconv.Itoa(p.Port)}
	s.Start()
	return s
}
