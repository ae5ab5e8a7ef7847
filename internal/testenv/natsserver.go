package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	return StartNATSBinary(t, bin)
}

var (
	natsModOnce sync.Once
	natsModBin  string
	natsModErr  error
)

// NATSModuleBinary builds the nats-server of this module's go.mod (2.15,
// newer than the 2.9 service and package: atomic batch publish needs 2.12)
// once per machine and version, and returns its path. The build takes a
// minute the first time; later runs find it in the user cache directory.
func NATSModuleBinary(t testing.TB) string {
	t.Helper()
	natsModOnce.Do(func() { natsModBin, natsModErr = buildNATSModule() })
	if natsModErr != nil {
		t.Fatalf("build nats-server from the module: %v", natsModErr)
	}
	return natsModBin
}

func buildNATSModule() (string, error) {
	const pkg = "github.com/nats-io/nats-server/v2"
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/txbox/txbox").Output()
	if err != nil {
		return "", fmt.Errorf("go list the txbox module: %w", err)
	}
	root := strings.TrimSpace(string(out))
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", pkg)
	cmd.Dir = root
	if out, err = cmd.Output(); err != nil {
		return "", fmt.Errorf("go list -m %s: %w", pkg, err)
	}
	version := strings.TrimSpace(string(out))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "txbox-test")
	bin := filepath.Join(dir, "nats-server-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built beside and renamed, so that a concurrent test process never
	// runs a half-written binary.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd = exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s@%s: %w\n%s", pkg, version, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// StartNATSBinary is StartNATS with a given nats-server binary.
func StartNATSBinary(t testing.TB, bin string) *NATSServer {
	t.Helper()
	p := newProcess(t, "nats-server", t.TempDir(), func(port int, dir string) []string {
		return []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir,
			"-l", filepath.Join(dir, "server.log")}
	})
	s := &NATSServer{Process: p, URL: "nats://127.0.0.1:" + strconv.Itoa(p.Port)}
	s.Start()
	return s
}
