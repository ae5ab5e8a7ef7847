package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
)

// What `go test -json` writes for runs of this module: a test's lines
// (testLines) and a package's (packageLines).
var (
	kafkaDedupeSkip = testLines(kafka, "TestConformance/NativeDedupe", "skip", 0, "    dedupe.go:14: skipped: adapter does not declare NativeDedupe\n")
	kafkaPass       = testLines(kafka, "TestConformance", "pass", 3.1) +
		packageLines(kafka, "pass", "PASS\n", "ok  \tgithub.com/txbox/txbox/broker/kafka\t14.886s\n")
	kcatSkip = testLines(kafka, "TestKcatReadsTheEvent", "skip", 0,
		"    kcat_test.go:25: skipped: kcat is not installed (Debian package kcat), so no stock command-line client read the record\n")
	relayFail = testLines(relay, "TestGivesUpAfterMaxAttempts", "fail", 10, "    relay_test.go:241: timed out after 10s waiting for dead after 3 attempts\n") +
		packageLines(relay, "fail", "FAIL\n", "FAIL\tgithub.com/txbox/txbox/relay\t10.512s\n")
)

const (
	kafka = "github.com/txbox/txbox/broker/kafka"
	relay = "github.com/txbox/txbox/relay"
)

// testLines is one test's run: its start, what it printed (whole lines),
// its closing "--- PASS" (FAIL, SKIP) line after secs, and its action.
func testLines(pkg, test, action string, secs float64, printed ...string) string {
	printed = append([]string{"=== RUN   " + test + "\n"}, printed...)
	printed = append(printed, fmt.Sprintf("--- %s: %s (%.2fs)\n", strings.ToUpper(action), test, secs))
	return jsonLines(pkg, test, "run", printed, action)
}

// packageLines is what a package's test binary printed outside any test,
// and its action.
func packageLines(pkg, action string, printed ...string) string {
	return jsonLines(pkg, "", "", printed, action)
}

// jsonLines is the events first, printed and last, one JSON line each.
func jsonLines(pkg, test, first string, printed []string, last string) string {
	var b strings.Builder
	add := func(action, output string) {
		line, _ := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: output})
		b.Write(append(line, '\n'))
	}
	if first != "" {
		add(first, "")
	}
	for _, p := range printed {
		add("output", p)
	}
	add(last, "")
	return b.String()
}

const (
	buildFail = `{"ImportPath":"github.com/txbox/txbox/store/storetest","Action":"build-output","Output":"store/storetest/clock.go:9:2: \"time\" imported and not used\n"}
{"ImportPath":"github.com/txbox/txbox/store/storetest","Action":"build-fail"}
{"Action":"start","Package":"github.com/txbox/txbox/examples"}
{"Action":"output","Package":"github.com/txbox/txbox/examples","Output":"FAIL\tgithub.com/txbox/txbox/examples [build failed]\n"}
{"Action":"fail","Package":"github.com/txbox/txbox/examples","Elapsed":0,"FailedBuild":"github.com/txbox/txbox/store/storetest"}
`
)

func run(t *testing.T, in string) (result, string) {
	t.Helper()
	var out strings.Builder
	res, err := check(strings.NewReader(in), &out, testenv.SkipAllowed)
	if err != nil {
		t.Fatal(err)
	}
	return res, out.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestListedSkipPasses(t *testing.T) {
	res, out := run(t, kafkaDedupeSkip+kafkaPass)
	if !res.ok() {
		t.Fatalf("a listed skip failed the run: %+v\n%s", res, out)
	}
	if got := lastLine(out); got != "1 passed, 0 failed, 1 skipped" {
		t.Errorf("closing line %q", got)
	}
	if !strings.Contains(out, "ok  \tgithub.com/txbox/txbox/broker/kafka\t14.886s\n") {
		t.Errorf("the package's ok line is missing:\n%s", out)
	}
	if strings.Contains(out, "=== RUN") || strings.Contains(out, "dedupe.go") {
		t.Errorf("a passing run's log shows test output:\n%s", out)
	}
}

func TestUnlistedSkipFails(t *testing.T) {
	res, out := run(t, kcatSkip+kafkaPass)
	if res.ok() || len(res.Unlisted) != 1 {
		t.Fatalf("an unlisted skip passed: %+v\n%s", res, out)
	}
	if !strings.Contains(out, "kcat is not installed") || !strings.Contains(out, "skipcheck: unlisted skip: github.com/txbox/txbox/broker/kafka TestKcatReadsTheEvent") {
		t.Errorf("the log does not say which skip and why:\n%s", out)
	}
	if got := lastLine(out); got != "1 passed, 0 failed, 1 skipped" {
		t.Errorf("closing line %q", got)
	}
}

func TestFailurePassesThrough(t *testing.T) {
	res, out := run(t, kafkaPass+relayFail)
	if res.ok() || res.Failed != 1 || res.PackagesFailed != 1 {
		t.Fatalf("a failure passed: %+v\n%s", res, out)
	}
	for _, want := range []string{
		"relay_test.go:241: timed out after 10s waiting for dead after 3 attempts\n",
		"--- FAIL: TestGivesUpAfterMaxAttempts (10.00s)\n",
		"FAIL\tgithub.com/txbox/txbox/relay\t10.512s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if got := lastLine(out); got != "1 passed, 1 failed, 0 skipped" {
		t.Errorf("closing line %q", got)
	}
}

func TestBuildFailureFails(t *testing.T) {
	res, out := run(t, buildFail)
	if res.ok() || !res.BuildFailed {
		t.Fatalf("a build failure passed: %+v\n%s", res, out)
	}
	if !strings.Contains(out, `"time" imported and not used`) || !strings.Contains(out, "[build failed]") {
		t.Errorf("the compiler's message is missing:\n%s", out)
	}
}

// A package killed while a test runs (go test -timeout) fails, and the log
// shows what the unfinished test printed.
func TestUnfinishedTestShown(t *testing.T) {
	in := `{"Action":"run","Package":"github.com/txbox/txbox/relay","Test":"TestHangs"}
{"Action":"output","Package":"github.com/txbox/txbox/relay","Test":"TestHangs","Output":"    relay_test.go:9: waiting for the broker\n"}
{"Action":"output","Package":"github.com/txbox/txbox/relay","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"github.com/txbox/txbox/relay","Elapsed":1}
`
	res, out := run(t, in)
	if res.ok() || !strings.Contains(out, "waiting for the broker") || !strings.Contains(out, "panic: test timed out") {
		t.Fatalf("%+v\n%s", res, out)
	}
}

func TestNoEventsFails(t *testing.T) {
	res, out := run(t, "no Go files in /x\n")
	if res.ok() || !strings.Contains(out, "no Go files in /x") {
		t.Fatalf("%+v\n%s", res, out)
	}
}

// Every entry of the list compiles and names a package and a test.
func TestSkipListIsWellFormed(t *testing.T) {
	for _, s := range testenv.Skips {
		if s.Package == "" || s.Test == "" || len(s.Reason) < 10 {
			t.Errorf("skip entry without package, test or reason: %+v", s)
		}
	}
	if _, ok := testenv.SkipAllowed("github.com/txbox/txbox/broker/kafka", "TestConformance/NativeDedupe"); !ok {
		t.Error("the listed kafka NativeDedupe skip is not allowed")
	}
	if _, ok := testenv.SkipAllowed("github.com/txbox/txbox/broker/nats", "TestConformance/NativeDedupe"); ok {
		t.Error("nats declares NativeDedupe: its skip must not be allowed")
	}
}
