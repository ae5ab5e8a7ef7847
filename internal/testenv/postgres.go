package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PostgresServer is a PostgreSQL server of the test's own (initdb into a
// temporary directory, trust authentication, wal_level = logical), so that
// a test can kill and restart it without touching the shared server.
type PostgresServer struct {
	*Process
	URL string // postgres://postgres@127.0.0.1:Port/postgres?sslmode=disable
	bin string // the directory of pg_isready
}

// Start (re)starts the server and waits until it accepts connections: its
// port opens while it still answers "the database system is starting up"
// (crash recovery after Kill takes longer).
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.Process.Start()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := pgReady(s.bin, s.Port)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("postgres on port %d not ready within 60s: %v", s.Port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Crash stops the server with an immediate shutdown (SIGQUIT): every
// session ends at once and nothing is checkpointed, so the next Start runs
// crash recovery, as after a power loss; unlike SIGKILL to the postmaster
// it leaves no backend behind holding the shared memory, which would keep
// the next Start from running.
func (s *PostgresServer) Crash() { s.signal(syscall.SIGQUIT) }

// PostgresBinaries finds the directory holding initdb and postgres (Debian
// keeps them out of PATH, per major version).
func PostgresBinaries() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // the newest version first
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if bin, err := exec.LookPath("initdb"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "pg_isready")); err == nil {
			return filepath.Dir(bin), nil
		}
	}
	_, err := findBinary("initdb", "postgresql")
	return "", err
}

// StartPostgres initialises and starts a PostgreSQL server, stopped when
// the test ends. PostgreSQL refuses to run as root: when the tests do, the
// server runs as the postgres user, which must then exist. Without the
// binaries it skips the test (or fails it when services are required).
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bin, err := PostgresBinaries()
	if err != nil {
		Missing(t, err.Error())
	}
	attr, err := postgresUser()
	if err != nil {
		Missing(t, err.Error())
	}
	dir := t.TempDir()
	if err := chownForPostgres(attr, filepath.Dir(dir), dir); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := initdb(bin, data, attr); err != nil {
		t.Fatal(err)
	}
	p := newProcess(t, "postgres", dir, func(port int, dir string) []string {
		return postgresArgs(bin, data, dir, port)
	})
	p.attr = attr
	s := &PostgresServer{Process: p, URL: postgresURL(p.Port), bin: bin}
	s.Start()
	return s
}

// postgresUser returns the exec attributes that run PostgreSQL as the
// postgres user when the tests run as root (nil otherwise).
func postgresUser() (*syscall.SysProcAttr, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no postgres user to run PostgreSQL as (Debian package postgresql): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// chownForPostgres gives dirs to the user attr runs PostgreSQL as.
func chownForPostgres(attr *syscall.SysProcAttr, dirs ...string) error {
	if attr == nil || attr.Credential == nil {
		return nil
	}
	for _, d := range dirs {
		if err := os.Chown(d, int(attr.Credential.Uid), int(attr.Credential.Gid)); err != nil {
			return err
		}
	}
	return nil
}

// initdb creates a cluster in data that trusts every local connection,
// replication ones included.
func initdb(bin, data string, attr *syscall.SysProcAttr) error {
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	cmd.SysProcAttr = attr
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return nil
}

// postgresArgs is the server's command line: loopback only, its socket in
// sockDir, logical decoding on, durability off (the data is thrown away).
func postgresArgs(bin, data, sockDir string, port int) []string {
	return []string{filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", sockDir,
		"-c", "listen_addresses=127.0.0.1", "-c", "wal_level=logical", "-c", "fsync=off",
		"-c", "max_replication_slots=10", "-c", "max_wal_senders=10", "-c", "shared_buffers=32MB"}
}

func postgresURL(port int) string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
}

// pgReady reports whether the server on port accepts connections.
func pgReady(bin string, port int) error {
	return exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres").Run()
}
