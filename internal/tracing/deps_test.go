package tracing_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The library uses the OpenTelemetry API only: its SDK and exporters are
// the binary's choice (cmd/txbox), never forced on a service that imports
// the core packages.
func TestCoreUsesOnlyTheOpenTelemetryAPI(t *testing.T) {
	core := []string{"github.com/txbox/txbox", "github.com/txbox/txbox/outbox", "github.com/txbox/txbox/relay",
		"github.com/txbox/txbox/inbox", "github.com/txbox/txbox/store", "github.com/txbox/txbox/broker"}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, core...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters") {
			t.Errorf("a core package depends on %s", dep)
		}
	}
}
