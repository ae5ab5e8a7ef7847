package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Process is a server process of a test's own (nats-server, redis-server,
// mosquitto) on a fixed loopback port and a directory of its own, so that the
// test can kill and restart it without touching the shared server. The
// kinds of server differ only in their command line.
type Process struct {
	t     testing.TB
	name  string
	Port  int
	Dir   string
	cmd   *exec.Cmd
	args  func() []string // binary and arguments; called on every Start
	exits chan struct{}
	// attr, if set, is the process's exec attributes (StartPostgres runs
	// the server as the postgres user when the tests run as root).
	attr *syscall.SysProcAttr
}

// newProcess prepares a process on a free port and dir; args gives its
// command line. The process is killed when the test ends.
func newProcess(t testing.TB, name, dir string, args func(port int, dir string) []string) *Process {
	p := &Process{t: t, name: name, Port: FreePort(t), Dir: dir}
	p.args = func() []string { return args(p.Port, p.Dir) }
	t.Cleanup(p.Kill)
	return p
}

// Start (re)starts the process on the same port and directory, and waits
// until the port accepts connections.
func (p *Process) Start() {
	p.t.Helper()
	if p.cmd != nil {
		return
	}
	argv := p.args()
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.SysProcAttr = p.attr
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.exits = make(chan struct{})
	go func(c *exec.Cmd, exits chan struct{}) { _ = c.Wait(); close(exits) }(p.cmd, p.exits)
	WaitPort(p.t, p.Port, 10*time.Second)
}

// Kill stops the process with SIGKILL, as a crash would.
func (p *Process) Kill() { p.signal(syscall.SIGKILL) }

// Stop stops the process with SIGTERM, as a clean shutdown would.
func (p *Process) Stop() { p.signal(syscall.SIGTERM) }

// signal sends sig, waits for the process to exit (killing it after 10 s)
// and for its port to close.
func (p *Process) signal(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	StopProcess(p.cmd.Process, sig, p.exits, 10*time.Second)
	for i := 0; i < 100 && portOpen(p.Port); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd = nil
}

// findBinary returns the first of names found on PATH or at one of the
// paths, or an error naming the Debian package.
func findBinary(name, pkg string, paths ...string) (string, error) {
	if bin, err := exec.LookPath(name); err == nil {
		return bin, nil
	}
	for _, bin := range paths {
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	return "", fmt.Errorf("%s binary not found (Debian package %s)", name, pkg)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
