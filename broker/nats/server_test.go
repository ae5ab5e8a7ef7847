package natsbroker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// server is a nats-server process this test owns, so it may kill it: the
// shared server on 4222 must stay up for everyone else.
type server struct {
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

func (s *server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// serverBinary finds nats-server: $TXBOX_NATS_SERVER, PATH, /usr/sbin.
func serverBinary() (string, error) {
	if p := os.Getenv("TXBOX_NATS_SERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	const p = "/usr/sbin/nats-server"
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("nats-server not in PATH nor at %s", p)
	}
	return p, nil
}

// startServer runs a JetStream server on a free loopback port with its store
// in a temp dir, and waits until JetStream answers.
func startServer(t *testing.T) (*server, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &server{bin: bin, port: port, dir: filepath.Join(t.TempDir(), "js")}
	t.Cleanup(s.kill)
	if err := s.start(); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(s.URL(), nats.Timeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) || i > 100 {
			return nil, fmt.Errorf("jetstream not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// start launches the process on the same port and store dir and waits until
// the port accepts connections (JetStream may still be recovering: the
// adapter has to cope with that).
func (s *server) start() error {
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 200 && time.Now().Before(deadline); i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("nats-server on port %d did not start", s.port)
}

// kill stops the process the hard way, as a crash would.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
