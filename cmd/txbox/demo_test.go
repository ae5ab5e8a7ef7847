package main_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README's first command, in a short mode: with no database or broker
// running for it (embedded NATS, SQLite files), the verdict comes from the
// databases and reports nothing lost and nothing applied twice, after real
// faults. The temporary directory is gone afterwards.
func TestDemoShortMode(t *testing.T) {
	out, code := run(t, nil, "demo", "--duration", "4s", "--orders", "300", "--kills", "2", "--duplicates", "20", "--seed", "42")
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, out)
	}
	for _, want := range []string{"VERDICT: OK", "lost                  0", "double effects        0", "effects of rollbacks  0", "2 relay SIGKILLs"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`duplicates absorbed\s+(\d+)\n`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Fatalf("the demo absorbed no duplicates: its faults did not happen\n%s", out)
	}
	dir := regexp.MustCompile(`databases: (\S+)/\{orders`).FindStringSubmatch(out)
	if dir == nil {
		t.Fatalf("no databases line:\n%s", out)
	}
	if _, err := os.Stat(dir[1]); !os.IsNotExist(err) {
		t.Fatalf("demo left %s behind (%v)", dir[1], err)
	}
}
