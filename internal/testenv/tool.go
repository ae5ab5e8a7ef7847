package testenv

import (
	"os/exec"
	"testing"
)

// toolPackages names the Debian package of each stock tool the tests drive,
// for the message when one is missing. .ci/run installs every one of them.
var toolPackages = map[string]string{
	"kcat":          "kcat",
	"kafkacat":      "kcat",
	"amqp-get":      "amqp-tools",
	"rabbitmqadmin": "rabbitmq-server",
	"mosquitto_sub": "mosquitto-clients",
	"redis-cli":     "redis-tools",
	"script":        "bsdutils",
}

// Tool returns the path of the first of names found on PATH: a stock
// command-line tool a test drives to check what txbox wrote. A missing tool
// is a missing service: the test skips locally and fails under
// TXBOX_REQUIRE_SERVICES=1, so CI cannot pass without running it.
func Tool(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	pkg := toolPackages[names[0]]
	if pkg == "" {
		pkg = "unknown"
	}
	Missing(t, names[0]+" is not installed (Debian package "+pkg+")")
	return ""
}
