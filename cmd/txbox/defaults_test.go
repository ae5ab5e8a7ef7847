package main_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/testenv"
	"github.com/txbox/txbox/relay"
)

// `txbox relay --lease 15s` starts: --publish-timeout follows the lease as
// the library's default does (min(10s, lease/3)) instead of a fixed 10s
// that a 15s lease refuses.
func TestRelayShortLeaseStarts(t *testing.T) {
	srv := testenv.StartNATS(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "outbox.db")
	bin := testenv.Binary(t) // built before the clock starts: a loaded machine takes long
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "relay", "--lease", "15s", "--db", db, "--migrate",
		"--broker", srv.URL, "--nats-create-stream")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			t.Fatalf("relay --lease 15s exited: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("relay --lease 15s did not start:\n%s", out.String())
		case <-tick.C:
		}
		if strings.Contains(out.String(), "relay started") {
			break
		}
	}
	_ = cmd.Process.Kill()
	<-done
}

// The CLI's defaults are the library's: the help text shows relay.Default*.
func TestRelayFlagDefaultsAreTheLibrarys(t *testing.T) {
	out, code := run(t, nil, "relay", "--help")
	if code != 0 {
		t.Fatalf("relay --help: exit %d\n%s", code, out)
	}
	for flag, want := range map[string]string{
		"--batch-size":       "(default " + itoa(relay.DefaultBatchSize) + ")",
		"--workers":          "(default " + itoa(relay.DefaultWorkers) + ")",
		"--poll-interval":    "(default " + relay.DefaultPollInterval.String() + ")",
		"--idle-poll-max":    "(default min(" + relay.DefaultIdlePollMax.String() + ", 2 x --poll-interval), or --poll-interval if that is longer)",
		"--lease":            "(default " + relay.DefaultLease.String() + ")",
		"--max-attempts":     "(default " + itoa(relay.DefaultMaxAttempts) + ")",
		"--backoff-max":      "(default " + relay.DefaultBackoffMax.String() + ")",
		"--outage-probe-max": "(default " + relay.DefaultOutageProbeMax.String() + ")",
		"--claims":           `(default "` + string(relay.ClaimAuto) + `")`,
		"--publish-timeout":  "lease/3",
		"--fail-fast":        "Default: wait for them",
	} {
		line := ""
		for l := range strings.SplitSeq(out, "\n") {
			if strings.Contains(l, flag+" ") {
				line = l
			}
		}
		if !strings.Contains(line, want) {
			t.Errorf("%s: help line %q, want it to contain %q", flag, line, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
