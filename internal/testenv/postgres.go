package testenv

import (
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
		err := exec.Command(filepath.Join(s.bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres").Run()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("postgres on port %d not ready within 60s: %v", s.Port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var attr *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Missing(t, "running as root, and no postgres user to run PostgreSQL as: "+err.Error())
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	initdb.SysProcAttr = attr
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p := newProcess(t, "postgres", dir, func(port int, dir string) []string {
		return []string{filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "wal_level=logical", "-c", "fsync=off",
			"-c", "max_replication_slots=10", "-c", "max_wal_senders=10", "-c", "shared_buffers=32MB"}
	})
	p.attr = attr
	s := &PostgresServer{Process: p, URL: "postgres://postgres@127.0.0.1:" + strconv.Itoa(p.Port) + "/postgres?sslmode=disable", bin: bin}
	s.Start()
	return s
}
