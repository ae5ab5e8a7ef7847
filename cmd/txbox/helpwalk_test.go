package main_test

import (
	"strings"
	"testing"
)

// walkHelp runs `txbox --help` and the --help of every command it lists,
// and of theirs in turn, handing each command's arguments and help text to
// visit; it returns the commands it walked below the root ("dead list").
func walkHelp(t *testing.T, visit func(args []string, help string)) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	var walk func(args []string)
	walk = func(args []string) {
		out, code := run(t, nil, append(args, "--help")...)
		if code != 0 {
			t.Fatalf("txbox %v --help: exit %d\n%s", args, code, out)
		}
		visit(args, out)
		_, cmds, ok := strings.Cut(out, "Available Commands:\n")
		if !ok {
			return
		}
		cmds, _, _ = strings.Cut(cmds, "\n\n")
		for _, l := range strings.Split(cmds, "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] == "help" || f[0] == "completion" {
				continue
			}
			sub := append(append([]string(nil), args...), f[0])
			if k := strings.Join(sub, " "); !seen[k] {
				seen[k] = true
				walk(sub)
			}
		}
	}
	walk(nil)
	return seen
}
