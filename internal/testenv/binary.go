package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// Binary builds cmd/txbox once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		// The txbox module's directory, also from a module that replaces
		// txbox with this tree (interop/).
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}/go.mod", "github.com/txbox/txbox").Output()
		if err != nil {
			buildErr = err
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := os.MkdirTemp("", "txbox-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "txbox")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/txbox")
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build txbox: %v\n%s", buildErr, buildOut)
	}
	return binPath
}
