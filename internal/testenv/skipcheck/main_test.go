package main

import (
	"strings"
	"testing"

	"github.com/txbox/txbox/internal/testenv"
)

// Lines recorded from `go test -json` runs of this module.
const (
	kafkaDedupeSkip = `{"Action":"run","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance/NativeDedupe"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance/NativeDedupe","Output":"=== RUN   TestConformance/NativeDedupe\n"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance/NativeDedupe","Output":"    dedupe.go:14: skipped: adapter does not declare NativeDedupe\n"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance/NativeDedupe","Output":"--- SKIP: TestConformance/NativeDedupe (0.00s)\n"}
{"Action":"skip","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance/NativeDedupe","Elapsed":0}
`
	kafkaPass = `{"Action":"run","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance","Output":"=== RUN   TestConformance\n"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance","Output":"--- PASS: TestConformance (3.10s)\n"}
{"Action":"pass","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestConformance","Elapsed":3.1}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Output":"PASS\n"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Output":"ok  \tgithub.com/txbox/txbox/broker/kafka\t14.886s\n"}
{"Action":"pass","Package":"github.com/txbox/txbox/broker/kafka","Elapsed":14.886}
`
	kcatSkip = `{"Action":"run","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestKcatReadsTheEvent"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestKcatReadsTheEvent","Output":"=== RUN   TestKcatReadsTheEvent\n"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestKcatReadsTheEvent","Output":"    kcat_test.go:25: skipped: kcat is not installed (Debian package kcat), so no stock command-line client read the record\n"}
{"Action":"output","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestKcatReadsTheEvent","Output":"--- SKIP: TestKcatReadsTheEvent (0.00s)\n"}
{"Action":"skip","Package":"github.com/txbox/txbox/broker/kafka","Test":"TestKcatReadsTheEvent","Elapsed":0}
`
	relayFail = `{"Action":"run","Package":"github.com/txbox/txbox/relay","Test":"TestGivesUpAfterMaxAttempts"}
{"Action":"output","Package":"github.com/txbox/txbox/relay","Test":"TestGivesUpAfterMaxAttempts","Output":"=== RUN   TestGivesUpAfterMaxAttempts\n"}
{"Action":"output","Package":"github.com/txbox/txbox/relay","Test":"TestGivesUpAfterMaxAttempts","Output":"    relay_test.go:241: timed out after 10s waiting for dead after 3 attempts\n"}
{"Action":"output","Package":"github.com/txbox/txbox/relay","Test":"TestGivesUpAfterMaxAttempts","Output":"--- FAIL: TestGivesUpAfterMaxAttempts (10.00s)\n"}
{"Action":"fail","Package":"github.com/txbox/txbox/relay","Test":"TestGivesUpAfterMaxAttempts","Elapsed":10}
{"Action":"output","Package":"github.com/txbox/txbox/relay","Output":"FAIL\n"}
{"Action":"output","Package":"github.com/txbox/txbox/relay","Output":"FAIL\tgithub.com/txbox/txbox/relay\t10.512s\n"}
{"Action":"fail","Package":"github.com/txbox/txbox/relay","Elapsed":10.512}
`
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
