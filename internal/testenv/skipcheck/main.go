// Command skipcheck reads `go test -json` on stdin and prints what a person
// reading a CI log needs: the output of every failed test, the ok/FAIL line
// of every package, and a closing line "N passed, N failed, N skipped". It
// exits non-zero when a test or a package failed, the build failed, or a test
// skipped without being listed in testenv.Skips: under
// TXBOX_REQUIRE_SERVICES=1 a skip nobody listed is a proof CI no longer runs.
//
//	TXBOX_REQUIRE_SERVICES=1 go test -json ./... | go run ./internal/testenv/skipcheck
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/txbox/txbox/internal/testenv"
)

func main() {
	res, err := check(os.Stdin, os.Stdout, testenv.SkipAllowed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(1)
	}
	if !res.ok() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json), build events
// included.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

// result counts tests and subtests by outcome.
type result struct {
	Passed, Failed, Skipped int
	Unlisted                []string // "package test" of each unlisted skip
	PackagesFailed          int
	BuildFailed             bool
	Events                  int
}

func (r result) ok() bool {
	return r.Events > 0 && r.Failed == 0 && r.PackagesFailed == 0 && !r.BuildFailed && len(r.Unlisted) == 0
}

// check reads the event stream from in, writes the human-readable log to out
// and returns the counts. allowed says whether a skip is listed.
func check(in io.Reader, out io.Writer, allowed func(pkg, test string) (string, bool)) (result, error) {
	var res result
	w := bufio.NewWriter(out)
	defer w.Flush()
	// Output of tests still running, by package and name: printed only if
	// the test fails, skips unlisted, or its package dies under it.
	running := map[string]map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			// Not an event (a go command message): pass it through.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		res.Events++
		switch {
		case e.Action == "build-output":
			w.WriteString(e.Output)
			continue
		case e.Action == "build-fail":
			res.BuildFailed = true
			continue
		case e.Test == "":
			// Package-level: its ok/FAIL line, and whatever a test binary
			// printed outside any test (a panic on timeout, TestMain).
			switch e.Action {
			case "output":
				if e.Output != "PASS\n" {
					w.WriteString(e.Output)
				}
			case "fail":
				res.PackagesFailed++
				// Tests that never ended died with their package (a
				// timeout, a crash): show what they printed.
				for name, lines := range running[e.Package] {
					fmt.Fprintf(w, "skipcheck: %s %s did not finish; its output:\n", e.Package, name)
					w.WriteString(strings.Join(lines, ""))
				}
				delete(running, e.Package)
			case "pass", "skip":
				delete(running, e.Package)
			}
			continue
		}
		tests := running[e.Package]
		if tests == nil {
			tests = map[string][]string{}
			running[e.Package] = tests
		}
		switch e.Action {
		case "run":
			tests[e.Test] = nil
		case "output":
			tests[e.Test] = append(tests[e.Test], e.Output)
		case "pass":
			res.Passed++
			delete(tests, e.Test)
		case "fail":
			res.Failed++
			w.WriteString(strings.Join(tests[e.Test], ""))
			delete(tests, e.Test)
		case "skip":
			res.Skipped++
			if _, ok := allowed(e.Package, e.Test); !ok {
				res.Unlisted = append(res.Unlisted, e.Package+" "+e.Test)
				w.WriteString(strings.Join(tests[e.Test], ""))
				fmt.Fprintf(w, "skipcheck: %s %s skipped, and internal/testenv/skips.go does not list it: fix the test or list the skip with its reason\n", e.Package, e.Test)
			}
			delete(tests, e.Test)
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if res.Events == 0 {
		fmt.Fprintln(w, "skipcheck: no test events on stdin (is go test running with -json?)")
	}
	for _, u := range res.Unlisted {
		fmt.Fprintf(w, "skipcheck: unlisted skip: %s\n", u)
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", res.Passed, res.Failed, res.Skipped)
	return res, nil
}
