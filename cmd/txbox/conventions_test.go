package main_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// `txbox version` and `--version` print the module version, the commit (or
// that the build has none) and the Go version from the build info.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, code := run(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "txbox ") || strings.Contains(out, "unknown") || !strings.Contains(out, runtime.Version()) ||
			(!strings.Contains(out, " commit ") && !strings.Contains(out, "(built without VCS information)")) {
			t.Fatalf("txbox %v: exit %d\n%s", args, code, out)
		}
	}
}

// A binary built without VCS information says so instead of "commit
// unknown".
func TestVersionWithoutVCS(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "txbox")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=false: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || strings.Contains(string(out), "unknown") || !strings.Contains(string(out), "txbox (devel) (built without VCS information) "+runtime.Version()) {
		t.Fatalf("txbox version of a build without VCS information: %v\n%s", err, out)
	}
}

// A mistyped command or flag is a usage error (exit 2, one line) with a
// suggestion; so is a bad value, from a flag or from its variable.
func TestUsageErrorsExit2WithSuggestion(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"dead", "lst"}, `unknown command "lst" for "txbox dead" (did you mean "list"?)`},
		{nil, []string{"stts"}, `unknown command "stts" for "txbox" (did you mean "stats"?)`},
		{nil, []string{"inbox", "replai"}, `(did you mean "replay"?)`},
		{nil, []string{"relay", "--bach-size", "5"}, "unknown flag: --bach-size (did you mean --batch-size?)"},
		{nil, []string{"stats", "--topic", "x"}, "unknown flag: --topic"},
		{nil, []string{"stats", "extra"}, `unknown command "extra" for "txbox stats"`},
		{nil, []string{"relay", "--batch-size", "lots"}, "--batch-size"},
		{[]string{"TXBOX_BATCH_SIZE=lots"}, []string{"relay"}, "--batch-size (TXBOX_BATCH_SIZE)"},
	} {
		out, code := run(t, c.env, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, c.want) {
			t.Fatalf("txbox %v (env %v): exit %d, want 2 and one line with %q; got:\n%s", c.args, c.env, code, c.want, out)
		}
	}
	// A group without a subcommand shows its help.
	if out, code := run(t, nil, "dead"); code != 0 || !strings.Contains(out, "purge") {
		t.Fatalf("txbox dead: exit %d\n%s", code, out)
	}
}

var flagLine = regexp.MustCompile(`^\s+(-\w, )?--[a-z-]+`)

// Each command's help lists its own flags only, every flag with its
// environment variable (--yes and --all: that they have none), and the exit
// codes.
func TestHelpListsOwnFlagsEnvAndExitCodes(t *testing.T) {
	relayOnly := []string{"--broker", "--topic", "--delete-sent", "--batch-size", "--nats-stream"}
	for _, c := range [][]string{{"relay"}, {"stats"}, {"dead", "list"}, {"dead", "purge"}, {"inbox", "list"}, {"cleanup"}, {"demo"}, {"migrate"}} {
		out, code := run(t, nil, append(c, "--help")...)
		if code != 0 || !strings.Contains(out, "Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.") {
			t.Fatalf("txbox %v --help: exit %d, no exit codes:\n%s", c, code, out)
		}
		for _, f := range relayOnly {
			if has := strings.Contains(out, f+" "); has != (c[0] == "relay") {
				t.Fatalf("txbox %v --help: %s listed: %v\n%s", c, f, has, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			onlyFlag := (strings.Contains(line, "--yes ") || strings.Contains(line, "--all ")) && strings.Contains(line, "[command line only")
			if flagLine.MatchString(line) && !strings.Contains(line, "--help") && !strings.Contains(line, "[TXBOX_") && !onlyFlag {
				t.Fatalf("txbox %v --help: flag without its variable: %q", c, line)
			}
		}
	}
	for _, c := range []string{"demo", "version"} {
		if out, _ := run(t, nil, c, "--help"); strings.Contains(out, "--db") || strings.Contains(out, "Global Flags") {
			t.Fatalf("txbox %s --help lists the database flags it does not use:\n%s", c, out)
		}
	}
	if out, _ := run(t, nil, "relay", "--help"); !strings.Contains(out, "kafka://") || !strings.Contains(out, "amqp://") {
		t.Fatalf("--broker help names only some schemes:\n%s", out)
	}
}

var helpFlag = regexp.MustCompile(`^\s+(?:-\w, )?--[a-z-]+((?: \S+)*?)(?:\s{2,}|$)`)

// In every command's help a flag is followed by its value's type or by
// nothing: text quoted in a usage string is not shown as the value name
// ("--mode txbox migrate --cdc").
func TestHelpValueNamesAreTypes(t *testing.T) {
	walkHelp(t, func(args []string, out string) {
		for _, line := range strings.Split(out, "\n") {
			m := helpFlag.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if v := strings.TrimSpace(m[1]); strings.Contains(v, " ") {
				t.Errorf("txbox %v --help shows %q as a value name: %q", args, v, line)
			}
		}
	})
	out, _ := run(t, nil, "relay", "--help")
	if !strings.Contains(out, "--mode string") {
		t.Fatalf("relay --help does not show --mode string:\n%s", out)
	}
}
