package testenv

import (
	"io"
	"os"
	"strings"
	"testing"
)

// CheckExample runs an Example function and fails t unless it printed want
// (compared as `go test` compares an example's "Output:", surrounding
// space trimmed). An example that needs a service cannot carry an
// "Output:" comment: `go test` would run it without the service and fail,
// and an example cannot skip. So such an example has none, and a test
// checks for the service (URL, which skips or fails as for any test) and
// then runs it through CheckExample: the example stays documentation that
// compiles, and is still verified wherever the service is.
func CheckExample(t *testing.T, example func(), want string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		r.Close()
		got <- string(b)
	}()
	func() {
		defer func() {
			os.Stdout = stdout
			w.Close()
		}()
		example()
	}()
	out := <-got
	if strings.TrimSpace(out) != strings.TrimSpace(want) {
		t.Fatalf("example printed:\n%s\nwant:\n%s", out, want)
	}
}
