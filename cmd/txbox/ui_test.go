package main_test

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/testenv"
)

// txbox ui refuses to answer other machines without a token: exit 2 and
// one line naming --addr, before it opens anything.
func TestUIRefusesNonLoopbackWithoutToken(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, c := range []struct {
		env   []string
		args  []string
		names string
	}{
		{nil, []string{"ui", "--addr", "0.0.0.0:8080", "--db", "postgres://u:hunter2@127.0.0.1:1/x"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", ":8080", "--db", "sqlite:///nonexistent/x.db"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "192.0.2.10:8080"}, "--addr (TXBOX_ADDR)"},
		{[]string{"TXBOX_ADDR=[::]:8080"}, []string{"ui"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "example.com:8080"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "no-port"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "0.0.0.0:8080", "--token-file", missing}, "--token-file (TXBOX_TOKEN_FILE)"},
		{nil, []string{"ui", "--token", "a", "--token-file", missing}, "--token (TXBOX_TOKEN)"},
		{[]string{"TXBOX_SAMPLE_EVERY=10ms"}, []string{"ui"}, "--sample-every (TXBOX_SAMPLE_EVERY)"},
	} {
		out, code := run(t, c.env, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, c.names) {
			t.Fatalf("txbox %v %v: exit %d, want 2 and one line naming %s; got:\n%s", c.env, c.args, code, c.names, out)
		}
		if strings.Contains(out, "hunter2") {
			t.Fatalf("password printed: %s", out)
		}
	}
}

// With a token (here from TXBOX_TOKEN) a non-loopback address is allowed,
// and the console then wants the token.
func TestUIServesWithToken(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "ui.db")
	if out, code := run(t, nil, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: %d %s", code, out)
	}
	cmd := exec.Command(testenv.Binary(t), "ui", "--db", db, "--addr", "0.0.0.0:0")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TXBOX_TOKEN=s3cret"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no banner: %v", err)
	}
	// "txbox console on http://[::]:PORT/ (database ...)"
	f := strings.Fields(line)
	if len(f) < 4 {
		t.Fatalf("banner: %q", line)
	}
	u := strings.Replace(strings.Replace(f[3], "[::]", "127.0.0.1", 1), "0.0.0.0", "127.0.0.1", 1)
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(token string) int {
		req, _ := http.NewRequest("GET", u+"api/overview", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(""); c != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", c)
	}
	if c := get("wrong"); c != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", c)
	}
	if c := get("s3cret"); c != http.StatusOK {
		t.Fatalf("token: %d, want 200", c)
	}
}
