// Package mqtttest runs a Mosquitto process of a test's own, on a free port
// of 127.0.0.1 and a store directory of its own, so that the test can stop,
// kill and restart it without touching a shared broker.
package mqtttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/testenv"
)

// Mosquitto is a mosquitto process. Its configuration: a listener on
// 127.0.0.1:Port, anonymous access, persistence in Dir (saved on a clean
// shutdown and every second), unlimited queues per client, plus the lines
// given to Start.
type Mosquitto struct {
	t     testing.TB
	bin   string
	Port  int
	Dir   string
	URL   string // mqtt://127.0.0.1:Port
	conf  string
	cmd   *exec.Cmd
	exits chan struct{}
}

// Binary returns the mosquitto binary's path, or "" when there is none.
func Binary() string {
	if bin, err := exec.LookPath("mosquitto"); err == nil {
		return bin
	}
	for _, bin := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
	return ""
}

// Start starts mosquitto and stops it when the test ends; without the
// binary the test is skipped (or fails under TXBOX_REQUIRE_SERVICES=1).
func Start(t testing.TB, extraConf ...string) *Mosquitto {
	t.Helper()
	bin := Binary()
	if bin == "" {
		testenv.Missing(t, "mosquitto binary (Debian package mosquitto)")
	}
	// Started as root, mosquitto drops to its own user, which must be able
	// to reach and write its store and log: a directory of the system's
	// temporary one (t.TempDir's parent is private), open to it.
	dir, err := os.MkdirTemp("", "txbox-mosquitto-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	m := &Mosquitto{t: t, bin: bin, Port: testenv.FreePort(t), Dir: dir}
	m.URL = "mqtt://127.0.0.1:" + strconv.Itoa(m.Port)
	lines := []string{
		fmt.Sprintf("listener %d 127.0.0.1", m.Port),
		"allow_anonymous true",
		"persistence true",
		"persistence_location " + m.Dir + "/",
		"autosave_interval 1",
		"max_queued_messages 0",
		"max_inflight_messages 0",
		"log_dest file " + filepath.Join(m.Dir, "mosquitto.log"),
		"log_type error",
		"log_type warning",
		"log_type notice",
	}
	m.conf = filepath.Join(m.Dir, "mosquitto.conf")
	if err := os.WriteFile(m.conf, []byte(strings.Join(append(lines, extraConf...), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Kill)
	return m
}

// Start (re)starts mosquitto on the same port and store, and waits until it
// accepts connections.
func (m *Mosquitto) Start() {
	m.t.Helper()
	if m.cmd != nil {
		return
	}
	m.cmd = exec.Command(m.bin, "-c", m.conf)
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("start mosquitto: %v", err)
	}
	m.exits = make(chan struct{})
	go func(c *exec.Cmd, exits chan struct{}) { _ = c.Wait(); close(exits) }(m.cmd, m.exits)
	testenv.WaitPort(m.t, m.Port, 10*time.Second)
}

// Stop stops mosquitto with SIGTERM, as a clean shutdown would: it tells
// its clients and saves its store.
func (m *Mosquitto) Stop() { m.signal(syscall.SIGTERM) }

// Kill stops mosquitto with SIGKILL, as a crash would: what changed since
// the last save (at most a second ago) is lost.
func (m *Mosquitto) Kill() { m.signal(syscall.SIGKILL) }

func (m *Mosquitto) signal(sig syscall.Signal) {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(sig)
	select {
	case <-m.exits:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exits
	}
	m.cmd = nil
}

// Log is what mosquitto logged so far.
func (m *Mosquitto) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.Dir, "mosquitto.log"))
	return string(b)
}
