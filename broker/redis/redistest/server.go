// Package redistest starts redis-server processes of a test's own, so that
// the test can kill and restart them without touching a shared server.
package redistest

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

	"github.com/txbox/txbox/internal/testenv"
)

// Server is a redis-server on 127.0.0.1 with an append-only file
// (appendfsync always) in a directory of its own: what it acknowledged
// survives Kill and Start.
type Server struct {
	t    testing.TB
	bin  string
	Port int
	Dir  string
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary finds redis-server, or returns an error saying it is missing.
func Binary() (string, error) {
	if bin, err := exec.LookPath("redis-server"); err == nil {
		return bin, nil
	}
	for _, bin := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	return "", fmt.Errorf("redis-server binary not found (Debian package redis-server)")
}

// Start starts a server and stops it when the test ends. Without the
// binary it skips the test (or fails it when services are required).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		testenv.Missing(t, err.Error())
	}
	s := &Server{t: t, bin: bin, Port: testenv.FreePort(t), Dir: t.TempDir()}
	s.URL = "redis://127.0.0.1:" + strconv.Itoa(s.Port) + "/0"
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start (re)starts the server on the same port and directory and waits
// until it answers.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--dir", s.Dir,
		"--logfile", filepath.Join(s.Dir, "redis.log"), "--daemonize", "no")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(s.cmd, s.done)
	testenv.WaitPort(s.t, s.Port, 10*time.Second)
}

// Kill stops the server with SIGKILL, as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	for i := 0; i < 100; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), 100*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd = nil
}
