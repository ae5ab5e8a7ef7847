package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A test package whose tests need something the shared PostgreSQL may lack
// (logical decoding: wal_level = logical) shares one private server among
// them: starting a cluster takes seconds, too long to pay per test. It is
// started by the first test that asks, and stopped by RunPackage once all
// of the package's tests ran.
var private struct {
	once    sync.Once
	mu      sync.Mutex
	srv     *privatePostgres
	missing string // a prerequisite is not installed: skip, or fail under TXBOX_REQUIRE_SERVICES=1
	err     error  // the prerequisites are there and the server still did not start
}

type privatePostgres struct {
	url    string
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// ownerFile, in a private server's directory, holds the pid of the test
// binary that started it.
const ownerFile = "owner.pid"

// privateDirPrefix names private servers' directories under os.TempDir().
const privateDirPrefix = "txbox-private-pg-"

// PrivatePostgres returns the URL and port of this test binary's private
// PostgreSQL server (trust authentication, wal_level = logical, database
// postgres), starting it on the first call. why says why the caller does
// not use the shared server; it is part of the message when the server
// binaries are missing, which skips the test (fails it when services are
// required). The package's TestMain must run its tests through RunPackage,
// which stops the server.
func PrivatePostgres(t testing.TB, why string) (url string, port int) {
	t.Helper()
	private.once.Do(startPrivatePostgres)
	if private.missing != "" {
		Missing(t, "logical decoding needs PostgreSQL with wal_level = logical: not the shared server ("+why+
			"), and a private one cannot start: "+private.missing)
	}
	if private.err != nil {
		t.Fatalf("private PostgreSQL (%s): %v", why, private.err)
	}
	if private.srv == nil {
		t.Fatal("private PostgreSQL asked for after RunPackage stopped it")
	}
	return private.srv.url, private.srv.port
}

// RunPackage runs the package's tests and then stops the servers its tests
// shared (the private PostgreSQL), returning m.Run's exit code: call it
// from TestMain as os.Exit(testenv.RunPackage(m)).
func RunPackage(m *testing.M) int {
	code := m.Run()
	StopPrivatePostgres()
	return code
}

// StopPrivatePostgres stops the private PostgreSQL, if one was started, and
// removes its files.
func StopPrivatePostgres() {
	private.mu.Lock()
	defer private.mu.Unlock()
	if s := private.srv; s != nil {
		s.stop()
		private.srv = nil
	}
}

func startPrivatePostgres() {
	private.mu.Lock()
	defer private.mu.Unlock()
	bin, err := PostgresBinaries()
	if err != nil {
		private.missing = "the PostgreSQL server binaries are not installed (initdb is neither on PATH nor in /usr/lib/postgresql/*/bin): " +
			"install the server package, Debian postgresql (e.g. postgresql-15)"
		return
	}
	attr, err := postgresUser()
	if err != nil {
		private.missing = err.Error()
		return
	}
	removeAbandonedPrivateDirs()
	private.srv, private.err = newPrivatePostgres(bin, attr)
}

func newPrivatePostgres(bin string, attr *syscall.SysProcAttr) (*privatePostgres, error) {
	dir, err := os.MkdirTemp("", privateDirPrefix)
	if err != nil {
		return nil, err
	}
	s := &privatePostgres{dir: dir}
	fail := func(err error) (*privatePostgres, error) { s.stop(); return nil, err }
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(err)
	}
	if err := chownForPostgres(attr, dir); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	if err := initdb(bin, data, attr); err != nil {
		return fail(err)
	}
	if s.port, err = freePort(); err != nil {
		return fail(err)
	}
	s.url = postgresURL(s.port)
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	argv := postgresArgs(bin, data, dir, s.port)
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server outlives every test but must not outlive the test binary:
	// one killed by -timeout or a panic never reaches RunPackage's stop, so
	// the kernel quits the server (immediate shutdown) when its parent
	// goes. That signal follows the thread that started the server, not
	// the process, hence the locked thread, which lives as long as the
	// server does.
	sysattr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT}
	if attr != nil {
		sysattr.Credential = attr.Credential
	}
	s.cmd.SysProcAttr = sysattr
	started := make(chan error, 1)
	s.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			close(s.exited)
			return
		}
		started <- nil
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		s.cmd = nil
		return fail(fmt.Errorf("start postgres: %w", err))
	}
	deadline := time.Now().Add(60 * time.Second)
	for pgReady(bin, s.port) != nil {
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return fail(fmt.Errorf("postgres on port %d exited at start:\n%s", s.port, log))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fail(fmt.Errorf("postgres on port %d not ready within 60s:\n%s", s.port, log))
		}
	}
	return s, nil
}

// stop quits the server at once (its data is thrown away) and removes its
// directory.
func (s *privatePostgres) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		StopProcess(s.cmd.Process, syscall.SIGQUIT, s.exited, 10*time.Second)
	}
	_ = os.RemoveAll(s.dir)
}

// removeAbandonedPrivateDirs removes the directories of private servers
// whose test binary is gone without stopping them (killed by -timeout, a
// panic): the kernel stopped the server, nobody removed its files.
func removeAbandonedPrivateDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), privateDirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // being created, or not ours to judge
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}
