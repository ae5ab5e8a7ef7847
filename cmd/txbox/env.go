package main

import (
	"log/slog"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagOnly are the switches that widen or unguard a destructive command:
// --all (every dead row, every parked event) and --yes (no confirmation).
// They have no environment variable: one left in a shell, a container's
// environment or a CI job would turn every later `txbox dead purge` into a
// purge of everything without a prompt.
var flagOnly = map[string]bool{"all": true, "yes": true}

// otherVariables are the TXBOX_* variables the binary reads that are no
// flag's.
var otherVariables = map[string]bool{"TXBOX_CPUPROFILE": true}

// harnessVariables are prefixes and names of variables that the project's
// test, fault and benchmark harnesses set for themselves: the binary
// inherits them when a harness runs it, and ignores them without a word.
var harnessVariables = []string{"TXBOX_TEST_", "TXBOX_BENCH_", "TXBOX_FAULTS_", "TXBOX_REQUIRE_SERVICES", "TXBOX_INBOX_CHILD", "TXBOX_NATS_SERVER", "TXBOX_CONSOLE_SCREENSHOTS"}

// warnEnv logs one warning per TXBOX_* variable of environ that the binary
// does not read: a misspelt name (TXBOX_BATCHSIZE) would otherwise leave
// the setting at its default without a word. The warning names the closest
// variable there is. A variable of a flag-only switch (TXBOX_YES) gets its
// own warning: it is deliberately not read. Variables of flags of other
// commands are known: one environment often serves several commands.
func warnEnv(root *cobra.Command, environ []string, log *slog.Logger) {
	known := knownVariables(root)
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TXBOX_") && !known[name] && !harnessVariable(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "TXBOX_"), "_", "-")); flagOnly[flag] {
			log.Warn("ignoring environment variable "+name+": --"+flag+" is given on the command line only, so that no environment confirms or widens a destructive command", "name", name)
			continue
		}
		if best := closestVariable(name, known); best != "" {
			log.Warn("ignoring unknown environment variable "+name+" (did you mean "+best+"?)", "name", name, "did_you_mean", best)
		} else {
			log.Warn("ignoring unknown environment variable "+name+" (no txbox flag has it; `txbox COMMAND --help` lists each flag's variable)", "name", name)
		}
	}
}

// knownVariables are the variables of every flag of every command.
func knownVariables(root *cobra.Command) map[string]bool {
	known := map[string]bool{}
	for k := range otherVariables {
		known[k] = true
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		add := func(fl *pflag.Flag) {
			if !flagOnly[fl.Name] && fl.Name != "help" && fl.Name != "version" {
				known[envName(fl.Name)] = true
			}
		}
		c.LocalFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return known
}

func harnessVariable(name string) bool {
	for _, p := range harnessVariables {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// closestVariable is the known variable fewest edits from name, at most 3
// edits away; "" when there is none that close.
func closestVariable(name string, known map[string]bool) string {
	best, bestD := "", 4
	for k := range known {
		if d := editDistance(name, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	return best
}
