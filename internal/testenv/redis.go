package testenv

import (
	"path/filepath"
	"strconv"
	"testing"
)

// RedisServer is a redis-server of the test's own with an append-only file
// (appendfsync always) in its directory: what it acknowledged survives Kill
// and Start.
type RedisServer struct {
	*Process
	URL string // redis://127.0.0.1:Port/0
}

// RedisBinary finds redis-server, or says it is missing.
func RedisBinary() (string, error) {
	return findBinary("redis-server", "redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server")
}

// StartRedis starts a redis-server and stops it when the test ends. Without
// the binary it skips the test (or fails it when services are required).
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin, err := RedisBinary()
	if err != nil {
		Missing(t, err.Error())
	}
	p := newProcess(t, "redis-server", t.TempDir(), func(port int, dir string) []string {
		return []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}
	})
	s := &RedisServer{Process: p, URL: "redis://127.0.0.1:" + strconv.Itoa(p.Port) + "/0"}
	s.Start()
	return s
}
