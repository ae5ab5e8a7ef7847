package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// NATSServer is a nats-server process of the test's own, on its own port and
// store directory, so the test can kill and restart it without touching the
// shared server.
type NATSServer struct {
	t    testing.TB
	bin  string
	Port int
	Dir  string
	URL  string
	cmd  *exec.Cmd
}

// StartNATS starts a JetStream-enabled nats-server on 127.0.0.1 and stops
// it when the test ends.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server"
		if _, err := os.Stat(bin); err != nil {
			Missing(t, "nats-server binary (Debian package nats-server)")
		}
	}
	s := &NATSServer{t: t, bin: bin, Port: FreePort(t), Dir: t.TempDir()}
	s.URL = "nats://127.0.0.1:" + strconv.Itoa(s.Port)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start (re)starts the server on the same port and store, and waits until
// it accepts connections.
func (s *NATSServer) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-js", "-sd", s.Dir,
		"-l", filepath.Join(s.Dir, "server.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	go func(c *exec.Cmd) { _ = c.Wait() }(s.cmd)
	WaitPort(s.t, s.Port, 10*time.Second)
}

// Kill stops the server with SIGKILL, as a crash would.
func (s *NATSServer) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	for i := 0; i < 100; i++ {
		if !portOpen(s.Port) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd = nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitPort waits until 127.0.0.1:port accepts connections.
func WaitPort(t testing.TB, port int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if portOpen(port) {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("port %d did not open within %v", port, d)
}

func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
