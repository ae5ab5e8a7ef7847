package depcheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/txbox/txbox"

// drivers are the third-party packages of each adapter: what no core
// package and no other adapter may compile.
var drivers = map[string][]string{
	"store/postgres": {"github.com/jackc/pgx/v5/pgxpool", "github.com/jackc/pgx/v5/stdlib"},
	// The CDC relay is part of the PostgreSQL adapter (it uses the store's
	// pool); only it reads the replication protocol.
	"store/postgres/cdc": {"github.com/jackc/pglogrepl"},
	"store/mysql":        {"github.com/go-sql-driver/mysql"},
	"store/sqlite":       {"modernc.org/sqlite"},
	"broker/nats":        {"github.com/nats-io/"},
	"broker/kafka":       {"github.com/twmb/franz-go", "github.com/IBM/sarama"},
	"broker/rabbitmq":    {"github.com/rabbitmq/"},
	"broker/redis":       {"github.com/redis/"},
	"broker/mqtt":        {"github.com/eclipse/paho"},
	"broker/webhook":     nil,
	"broker/mem":         nil,
}

// pgx is the driver package itself. Of the core, only pgxtx (pgx.Tx as
// store.Tx, the outbox and inbox on pgx) may compile it: its pool may not.
const pgx = "github.com/jackc/pgx/v5"

var core = []string{"", "outbox", "relay", "inbox", "store", "broker", "pgxtx", "console", "telemetry"}

// telemetryLibs are the metrics and tracing libraries: their
// implementations of the telemetry hooks (telemetry/prom, telemetry/otel)
// are the only packages of the module's library that compile them, and
// a program wires those in (cmd/txbox does). No core package may.
var telemetryLibs = []string{"github.com/prometheus/", "go.opentelemetry.io/"}

// jackc is every package of pgx's author (pgx, pgconn, pgio, puddle,
// pglogrepl): of the core, only pgxtx may compile them.
const jackc = "github.com/jackc/"

// maxRelayDeps bounds `go list -deps` of package relay, standard library
// included: a service that embeds a relay compiles what it uses.
const maxRelayDeps = 120

// violations lists what pkg (a path below the module, "" for the root)
// must not depend on but does.
func violations(pkg string, deps []string) []string {
	var bad []string
	isCore := slices.Contains(core, pkg)
	for _, d := range deps {
		for adapter, prefixes := range drivers {
			// A package below an adapter (store/postgres/cdc) belongs to
			// it and may use its drivers.
			if adapter == pkg || strings.HasPrefix(pkg, adapter+"/") {
				continue
			}
			if isCore && (d == mod+"/"+adapter || strings.HasPrefix(d, mod+"/"+adapter+"/")) {
				bad = append(bad, d+" (adapter)")
			}
			for _, p := range prefixes {
				if strings.HasPrefix(d, p) && (isCore || strings.HasPrefix(adapter, strings.SplitN(pkg, "/", 2)[0]+"/")) {
					bad = append(bad, d+" (driver of "+adapter+")")
				}
			}
		}
		if d == pgx || strings.HasPrefix(d, pgx+"/") {
			if (isCore && pkg != "pgxtx") || pkg == "store/mysql" || pkg == "store/sqlite" {
				bad = append(bad, d+" (pgx)")
			}
		}
		for _, p := range telemetryLibs {
			if isCore && strings.HasPrefix(d, p) {
				bad = append(bad, d+" (metrics or tracing library: the telemetry hooks' implementations)")
			}
		}
		if isCore && pkg != "pgxtx" && strings.HasPrefix(d, jackc) {
			bad = append(bad, d+" (jackc)")
		}
		if isCore && (d == mod+"/telemetry/prom" || d == mod+"/telemetry/otel") {
			bad = append(bad, d+" (telemetry implementation)")
		}
		if strings.HasPrefix(d, "github.com/cloudevents/") {
			bad = append(bad, d+" (test-only interop dependency)")
		}
	}
	return bad
}

func deps(t *testing.T, pkg string) []string {
	t.Helper()
	path := mod
	if pkg != "" {
		path += "/" + pkg
	}
	out, err := exec.Command("go", "list", "-deps", path).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", path, err)
	}
	return strings.Fields(string(out))
}

func TestDependenciesPointOneWay(t *testing.T) {
	pkgs := append([]string(nil), core...)
	for a := range drivers {
		pkgs = append(pkgs, a)
	}
	for _, pkg := range pkgs {
		if bad := violations(pkg, deps(t, pkg)); len(bad) > 0 {
			t.Errorf("%s/%s depends on:\n  %s", mod, pkg, strings.Join(bad, "\n  "))
		}
	}
}

// The relay, the inbox and the outbox writer compile no database driver and
// no metrics or tracing library (the telemetry hooks keep those out), and
// the relay compiles at most maxRelayDeps packages (issue 33).
func TestCoreDependenciesAreFew(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", mod+"/relay", mod+"/inbox", mod+"/outbox").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, p := range append([]string{jackc}, telemetryLibs...) {
			if strings.HasPrefix(d, p) {
				t.Errorf("relay, inbox or outbox depends on %s", d)
			}
		}
	}
	if n := len(deps(t, "relay")); n > maxRelayDeps {
		t.Errorf("go list -deps %s/relay: %d packages, want at most %d", mod, n, maxRelayDeps)
	}
}

// The check itself notices each kind of wrong dependency.
func TestViolationsNoticed(t *testing.T) {
	for _, c := range []struct {
		pkg, dep string
	}{
		{"inbox", mod + "/store/postgres"},
		{"outbox", "github.com/jackc/pgx/v5/pgxpool"},
		{"outbox", "github.com/jackc/pgx/v5"},
		{"outbox", "github.com/jackc/pgx/v5/pgconn"},
		{"relay", "github.com/jackc/pgx/v5"},
		{"", "github.com/nats-io/nats.go"},
		{"broker", mod + "/broker/mem"},
		{"store/mysql", "github.com/jackc/pgx/v5/pgconn"},
		{"store/sqlite", "github.com/go-sql-driver/mysql"},
		{"store/postgres", "modernc.org/sqlite"},
		{"broker/nats", "github.com/twmb/franz-go/pkg/kgo"},
		{"store", "github.com/cloudevents/sdk-go/v2"},
		{"relay", mod + "/store/postgres/cdc"},
		{"outbox", "github.com/jackc/pglogrepl"},
		{"store/postgres", "github.com/jackc/pglogrepl"},
		{"relay", "github.com/prometheus/client_golang/prometheus"},
		{"inbox", "go.opentelemetry.io/otel/trace"},
		{"outbox", "go.opentelemetry.io/otel/propagation"},
		{"telemetry", "github.com/prometheus/client_model/go"},
		{"inbox", "github.com/jackc/puddle/v2"},
		{"relay", mod + "/telemetry/prom"},
	} {
		if bad := violations(c.pkg, []string{"fmt", c.dep}); len(bad) == 0 {
			t.Errorf("%q depending on %s not noticed", c.pkg, c.dep)
		}
	}
	for _, ok := range []struct{ pkg, dep string }{
		{"pgxtx", "github.com/jackc/pgx/v5/pgconn"},
		{"pgxtx", mod + "/outbox"},
		{"store/postgres", "github.com/jackc/pgx/v5/pgxpool"},
		{"broker/nats", "github.com/nats-io/nats.go"},
		{"store/mysql", "github.com/go-sql-driver/mysql"},
		{"store/postgres/cdc", "github.com/jackc/pglogrepl"},
		{"store/postgres/cdc", "github.com/jackc/pgx/v5/pgxpool"},
		{"store/postgres/cdc", "github.com/prometheus/client_golang/prometheus"},
		{"relay", mod + "/telemetry"},
		{"telemetry/prom", "github.com/prometheus/client_golang/prometheus"},
		{"telemetry/otel", "go.opentelemetry.io/otel/trace"},
	} {
		if bad := violations(ok.pkg, []string{ok.dep}); len(bad) > 0 {
			t.Errorf("%q depending on %s flagged: %v", ok.pkg, ok.dep, bad)
		}
	}
}
