// Package testenv gives tests the URLs of the real services they run
// against, and decides what a missing service means: a skip with a clear
// message locally, a failure when TXBOX_REQUIRE_SERVICES=1 (as in CI).
package testenv

import (
	"context"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// Service defaults match the machines this project runs on.
var defaults = map[string]string{
	"TXBOX_TEST_POSTGRES": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	"TXBOX_TEST_MYSQL":    "mysql://root@127.0.0.1:3306/test",
	"TXBOX_TEST_NATS":     "nats://127.0.0.1:4222",
	"TXBOX_TEST_AMQP":     "amqp://guest:guest@127.0.0.1:5672/",
	"TXBOX_TEST_REDIS":    "redis://127.0.0.1:6379/0",
	"TXBOX_TEST_MQTT":     "mqtt://127.0.0.1:1883",
}

// URL returns the service URL for env (e.g. "TXBOX_TEST_POSTGRES") after
// checking that its port answers; otherwise it skips or fails the test.
func URL(t testing.TB, env string) string {
	t.Helper()
	u := Setting(env)
	if u == "" {
		t.Fatalf("testenv: no default for %s", env)
	}
	if err := reachable(u); err != nil {
		Missing(t, env+"="+u+": "+err.Error())
	}
	return u
}

// Setting is the service URL for env, or its default when env is unset,
// without checking that it answers.
func Setting(env string) string {
	if u := os.Getenv(env); u != "" {
		return u
	}
	return defaults[env]
}

// Missing skips, or fails when services are required.
func Missing(t testing.TB, what string) {
	t.Helper()
	if Required() {
		t.Fatalf("required service unavailable (TXBOX_REQUIRE_SERVICES=1): %s", what)
	}
	t.Skipf("service unavailable, skipping (set TXBOX_REQUIRE_SERVICES=1 to fail instead): %s", what)
}

// Required reports whether a missing service must fail the test.
func Required() bool { return os.Getenv("TXBOX_REQUIRE_SERVICES") == "1" }

func reachable(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		return nil // socket or default port: let the client decide
	}
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	return c.Close()
}
